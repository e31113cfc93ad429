/**
 * Secrets: opaque tokens, their SHA-256 lookups, scrypt password hashes and constant-time
 * comparison. Tokens are 32 random bytes, so a fast hash is enough to store them; passwords are
 * low-entropy and get scrypt with a per-password salt, its parameters encoded beside the hash.
 */
import { createHash, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

export const SESSION_TOKEN_PREFIX = 'biam_ses_';
export const API_KEY_PREFIX = 'biam_key_';

/** 32 random bytes as base64url: 43 characters. */
const TOKEN_BODY = /^[A-Za-z0-9_-]{43}$/;

export function newToken(prefix: string): string {
  return prefix + randomBytes(32).toString('base64url');
}

/** Whether a credential has the shape of a token of this prefix (before any lookup). */
export function hasTokenShape(credential: string, prefix: string): boolean {
  return credential.startsWith(prefix) && TOKEN_BODY.test(credential.slice(prefix.length));
}

/** The stored form of a token: SHA-256, lowercase hex. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** Constant-time equality of two strings (false, without early exit on content, when lengths differ). */
export function safeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  if (left.length !== right.length) {
    timingSafeEqual(left, left);
    return false;
  }
  return timingSafeEqual(left, right);
}

const SCRYPT = { N: 16384, r: 8, p: 1, keylen: 32 } as const;

function scryptAsync(
  password: string,
  salt: Buffer,
  N: number,
  r: number,
  p: number,
  keylen: number,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFKC'), salt, keylen, { N, r, p, maxmem: 256 * N * r }, (error, key) =>
      error ? reject(error) : resolve(key),
    );
  });
}

/** `scrypt$N$r$p$salt$hash` (base64url), so parameters can be raised later without a migration. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scryptAsync(password, salt, SCRYPT.N, SCRYPT.r, SCRYPT.p, SCRYPT.keylen);
  return ['scrypt', SCRYPT.N, SCRYPT.r, SCRYPT.p, salt.toString('base64url'), key.toString('base64url')].join(
    '$',
  );
}

// Verifying against this when the email is unknown keeps both failures equally slow.
let dummyHash: Promise<string> | undefined;

/** Whether `password` matches `encoded`; a null `encoded` still spends the time of one check. */
export async function verifyPassword(password: string, encoded: string | null): Promise<boolean> {
  const target = encoded ?? (await (dummyHash ??= hashPassword(randomBytes(16).toString('hex'))));
  const parts = target.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [N, r, p] = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  if (![N, r, p].every((n) => Number.isInteger(n) && n > 0) || N > 1 << 20) return false;
  const salt = Buffer.from(parts[4]!, 'base64url');
  const expected = Buffer.from(parts[5]!, 'base64url');
  const actual = await scryptAsync(password, salt, N, r, p, expected.length);
  const same = actual.length === expected.length && timingSafeEqual(actual, expected);
  return encoded !== null && same;
}
