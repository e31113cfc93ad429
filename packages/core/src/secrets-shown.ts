/**
 * Secrets inside messages. An error message may quote what a caller sent (a cursor, a selector, a
 * time), and a caller may have pasted a token there by mistake; the message then reaches a terminal,
 * a CI log or a bug report. Every error answer and every failure the CLI prints passes through
 * hideSecrets, so a value that looks like a credential is described, never shown.
 */

/** What stands in a message for a value that looks like a credential. */
export const SECRET_SHOWN = '(a value that looks like a credential, not shown)';

/**
 * A value as a message writes it: a run of the characters keys and tokens are written in (base64
 * and base64url, so `+`, `/`, `_` and `-` too) with any `=` padding. Judged and hidden whole, never
 * up to a `+` or a `/` with the rest left showing (issue 31). A `.` ends a value, so a file name's
 * extension and each part of a JWT or of `jtok_….SECRET` are values of their own.
 */
const VALUE = /[A-Za-z0-9+/_-]+=*/g;

/** A public key's pin (`sha256/` and the base64 of its hash): public, published to be compared. */
const PIN = /^sha256\/[A-Za-z0-9+/]{43}=$/;

/** Random bytes written out mix upper case, lower case and digits; ids, hashes and words do not. */
function mixed(text: string): boolean {
  return /[A-Z]/.test(text) && /[a-z]/.test(text) && /[0-9]/.test(text);
}

/** Upper and lower case both: a long name that has them reads as base64, not as a word. */
function cased(text: string): boolean {
  return /[A-Z]/.test(text) && /[a-z]/.test(text);
}

/**
 * A path of names, not a key: it holds a `/` but no `+` or padding, and none of its names' parts
 * (split at `/`, `-` and `_`) is 16 or more mixed characters or 12 or more of both cases. With a `-`
 * or `_` beside its `/` it is no one encoding (base64 has `/` and never `-` or `_`, base64url the
 * reverse), so temporary directories' random suffixes pass (`.tmp-cli-3OCrpm/init-lNiZe0/x`).
 * Without one it could be standard base64, and passes only when at most one part mixes upper case,
 * lower case and digits: random base64 splits into several such pieces, and about one
 * standard-base64 key in a million (one with `/`, no `+` and no padding) still passes as a path.
 */
function isPath(value: string): boolean {
  if (!value.includes('/') || value.includes('+') || value.endsWith('=')) return false;
  const parts = value.split(/[/_-]/).filter((part) => part.length > 0);
  if (parts.some((part) => (part.length >= 16 && mixed(part)) || (part.length >= 12 && cased(part))))
    return false;
  return /[-_]/.test(value) || parts.filter(mixed).length <= 1;
}

/**
 * Whether a value looks like a credential: 32 or more characters that mix upper case, lower case
 * and digits. Ids (lower-case base32), hashes and UUIDs (lower-case hex) and words never mix cases
 * so, a key pin is public, and a path of ordinary names stays readable
 * (docs/decisions/secrets-shown.md).
 */
function isSecretValue(value: string): boolean {
  if (PIN.test(value)) return false;
  const body = value.replace(/=+$/, '');
  return body.length >= 32 && mixed(body) && !isPath(value);
}

/** `text` with every value that looks like a credential replaced, whole, by SECRET_SHOWN. */
export function hideSecrets(text: string): string {
  return text.replace(VALUE, (value) => (isSecretValue(value) ? SECRET_SHOWN : value));
}

/** A JSON value with hideSecrets applied to every string in it, keys included (error details). */
export function hideSecretsIn<T>(value: T): T {
  if (typeof value === 'string') return hideSecrets(value) as T;
  if (Array.isArray(value)) return (value as unknown[]).map((item) => hideSecretsIn(item)) as T;
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [hideSecrets(key), hideSecretsIn(item)]),
    ) as T;
  }
  return value;
}
