/**
 * Command-line words inside error messages. An argument may be a secret pasted by mistake (a token
 * after `auth login`, a key where a command was meant), and an error is printed to a terminal, a
 * CI log or a bug report, so a word that looks like a credential is described, never shown.
 */

/** Whether a word looks like a token or key rather than a name, id-like typo or value. */
export function looksLikeSecret(word: string): boolean {
  // An id (`pool_01k5w…`: one lowercase prefix, base32) is not a secret, and a mistyped one is worth showing.
  if (/^[a-z]{2,8}_[0-9a-z]{10,40}$/.test(word)) return false;
  return word.length > 40 || /_[A-Za-z0-9+/=.-]{20,}/.test(word) || /[A-Za-z0-9+/=]{32,}/.test(word);
}

/** `"word"`, or a description of it when it looks like a credential. */
export function shownWord(word: string): string {
  return looksLikeSecret(word) ? 'a value that looks like a credential (not shown)' : `"${word}"`;
}
