/**
 * Secrets inside messages. An error message may quote what a caller sent (a cursor, a selector, a
 * time), and a caller may have pasted a token there by mistake; the message then reaches a terminal,
 * a CI log or a bug report. Every error answer and every failure the CLI prints passes through
 * hideSecrets, so a value that looks like a credential is described, never shown.
 */

/** What stands in a message for a value that looks like a credential. */
export const SECRET_SHOWN = '(a value that looks like a credential, not shown)';

/**
 * A credential's random part: 32 or more base64url characters with upper case, lower case and digits
 * (random bytes give all three). Ids (lower-case base32), hashes and UUIDs (lower-case hex) and
 * words never mix cases so, so they stay readable.
 */
const RUN = /[A-Za-z0-9_-]{32,}/g;

function isSecretRun(run: string): boolean {
  return /[A-Z]/.test(run) && /[a-z]/.test(run) && /[0-9]/.test(run);
}

/** `text` with every run that looks like a credential replaced by SECRET_SHOWN. */
export function hideSecrets(text: string): string {
  return text.replace(RUN, (run) => (isSecretRun(run) ? SECRET_SHOWN : run));
}

/** A JSON value with hideSecrets applied to every string in it, keys included (error details). */
export function hideSecretsIn<T>(value: T): T {
  if (typeof value === 'string') return hideSecrets(value) as T;
  if (Array.isArray(value)) return value.map((item) => hideSecretsIn(item)) as T;
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [hideSecrets(key), hideSecretsIn(item)]),
    ) as T;
  }
  return value;
}
