/**
 * Approver keys: ECDSA P-256 with SHA-256, held by people, never by the server. Signatures are IEEE
 * P1363 (r || s, exactly 64 bytes): one fixed shape, so no DER/BER spelling question arises, and
 * both low and high S verify (Wycheproof's valid vectors include the malleated twin; an approval is
 * counted once per key id, so a second spelling of one signature gains nothing).
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  sign,
  verify,
} from 'node:crypto';
import { ComputeError } from '../errors.js';
import { spkiDerOfPem, strictSpkiKey } from '../spki.js';
import { fromBase64url, toBase64url } from './bytes.js';

/** The length of an approval signature: r and s, 32 bytes each. */
export const SIGNATURE_BYTES = 64;

/** An SPKI of a P-256 key is 91 bytes; allow a little for other encodings before refusing. */
const MAX_SPKI_BYTES = 200;

/**
 * A key's id: unpadded base64url of the first 16 bytes of SHA-256 over its SPKI DER (22
 * characters). Only a name: every check looks the key up by kid and then verifies under the public
 * key the approver set pins, and a set whose kid does not match its key is refused.
 */
export function keyId(publicKey: KeyObject): string {
  const der = publicKey.export({ type: 'spki', format: 'der' });
  return toBase64url(createHash('sha256').update(der).digest().subarray(0, 16));
}

const isP256 = (key: KeyObject) =>
  key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1';

/** A P-256 public key from its SPKI DER, or null when it is anything else. */
export function publicKeyFromSpki(der: Uint8Array): KeyObject | null {
  return strictSpkiKey(der, MAX_SPKI_BYTES, isP256);
}

/** The unpadded base64url of a key's SPKI DER: how approver sets carry keys. */
export const encodePublicKey = (key: KeyObject): string =>
  toBase64url(key.export({ type: 'spki', format: 'der' }));

/** A P-256 public key from base64url SPKI DER or an SPKI PEM (a `PATH.pub` file), else null. */
export function decodePublicKey(text: unknown): KeyObject | null {
  if (typeof text !== 'string') return null;
  const pem = spkiDerOfPem(text);
  if (pem) return publicKeyFromSpki(pem);
  const der = fromBase64url(text, MAX_SPKI_BYTES);
  return der ? publicKeyFromSpki(der) : null;
}

/**
 * Verifies a P1363 ECDSA P-256 SHA-256 signature. Strict: exactly 64 bytes, r and s in [1, n-1]
 * (OpenSSL refuses the rest), the key a P-256 public key. Never throws.
 */
export function verifyP256(publicKey: KeyObject, message: Uint8Array, signature: Uint8Array): boolean {
  if (!isP256(publicKey) || publicKey.type !== 'public' || signature.length !== SIGNATURE_BYTES) return false;
  try {
    return verify('sha256', message, { key: publicKey, dsaEncoding: 'ieee-p1363' }, signature);
  } catch {
    return false;
  }
}

/** Signs with an approver's private key: a P1363 signature, 64 bytes. */
export function signP256(privateKey: KeyObject, message: Uint8Array): Uint8Array {
  if (!isP256(privateKey) || privateKey.type !== 'private') throw new RangeError('not a P-256 private key');
  return new Uint8Array(sign('sha256', message, { key: privateKey, dsaEncoding: 'ieee-p1363' }));
}

/** The passphrase cipher of an encrypted key file (PKCS#8 PBES2). */
const KEY_CIPHER = 'aes-256-cbc';

export interface ApproverKeyFiles {
  kid: string;
  /** PKCS#8 PEM, encrypted when a passphrase was given. */
  privatePem: string;
  /** SPKI PEM, for `PATH.pub`. */
  publicPem: string;
}

/** A new approver key as its two files. */
export function generateApproverKey(passphrase?: string): ApproverKeyFiles {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const privatePem = passphrase
    ? privateKey.export({ type: 'pkcs8', format: 'pem', cipher: KEY_CIPHER, passphrase })
    : privateKey.export({ type: 'pkcs8', format: 'pem' });
  return {
    kid: keyId(publicKey),
    privatePem: privatePem as string,
    publicPem: publicKey.export({ type: 'spki', format: 'pem' }) as string,
  };
}

export const isEncryptedKeyPem = (pem: string): boolean =>
  pem.includes('-----BEGIN ENCRYPTED PRIVATE KEY-----');

/**
 * An approver's private key from its PEM. An encrypted one needs the passphrase (MISSING_ENV
 * without it); a wrong passphrase or anything but a P-256 key is INVALID_ARGUMENT. `name` is how
 * messages refer to the file; the passphrase never appears in one.
 */
export function readApproverKey(
  pem: string,
  name: string,
  passphrase?: string,
): { privateKey: KeyObject; kid: string } {
  const encrypted = isEncryptedKeyPem(pem);
  if (encrypted && !passphrase)
    throw new ComputeError(
      'MISSING_ENV',
      `${name} is encrypted and BETTER_COMPUTE_APPROVER_PASSPHRASE is not set`,
      {
        hint: 'Set BETTER_COMPUTE_APPROVER_PASSPHRASE to the passphrase the key was made with.',
      },
    );
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(
      encrypted ? { key: pem, format: 'pem', passphrase: passphrase! } : { key: pem, format: 'pem' },
    );
  } catch {
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `${name} is not an approver key${encrypted ? ', or the passphrase is wrong' : ''}`,
      {
        hint: encrypted
          ? 'Check BETTER_COMPUTE_APPROVER_PASSPHRASE, and give the file "better-compute batch keygen" wrote.'
          : 'Give the file "better-compute batch keygen" wrote.',
      },
    );
  }
  if (!isP256(privateKey))
    throw new ComputeError('INVALID_ARGUMENT', `${name} is not a P-256 key`, {
      hint: 'Approver keys are ECDSA P-256: make one with "better-compute batch keygen".',
    });
  return { privateKey, kid: keyId(createPublicKey(privateKey)) };
}
