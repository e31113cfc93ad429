/**
 * Sealing the PKI bundle's private keys: AES-256-GCM under a key derived from the deployment
 * secret (BETTER_COMPUTE_SECRET) with scrypt and the bundle's own salt. Each sealed key binds its
 * purpose and public pin as associated data, so a sealed key moved into another slot (an audit
 * key pasted over the command root, say) fails to open instead of signing for the wrong job.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes, scrypt } from 'node:crypto';
import { ComputeError } from '@better-compute/core';

/** The sealed-key format written today; `pki reseal` rewrites older ones in it. */
const SEAL_VERSION = 1;

/** What each private key of the bundle is for; bound into its sealed form. */
export type KeyPurpose =
  'machine-ca' | 'command-root' | 'exec-ticket' | 'break-glass-ssh-ca' | 'sandbox-ssh-ca' | 'audit';

/** The bundle's key derivation: scrypt over the secret with a per-bundle salt. */
export interface SealParams {
  readonly kdf: 'scrypt';
  /** CPU/memory cost, a power of two, at least 2^15. */
  readonly N: number;
  readonly r: number;
  readonly p: number;
  /** base64, 16 bytes or more, made once per bundle (and again by `reseal`). */
  readonly salt: string;
}

/** One sealed private key (PKCS#8 DER inside). */
export interface SealedKey {
  readonly v: number;
  /** base64 of the 12-byte GCM nonce. */
  readonly iv: string;
  /** base64 of the ciphertext. */
  readonly ct: string;
  /** base64 of the 16-byte GCM tag. */
  readonly tag: string;
}

export const MIN_SCRYPT_N = 2 ** 15;

/** Fresh parameters for a new bundle (or a reseal). */
export function newSealParams(): SealParams {
  return { kdf: 'scrypt', N: MIN_SCRYPT_N, r: 8, p: 1, salt: randomBytes(16).toString('base64') };
}

/** The code of a key that does not open: a wrong secret, a tampered blob, or a key in the wrong slot. */
const UNSEAL_FAILED = 'PKI_UNSEAL_FAILED';

/** Throws MISSING_ENV when there is no secret to seal or unseal with. */
export function requireSecret(secret: string | undefined, variable = 'BETTER_COMPUTE_SECRET'): string {
  if (typeof secret !== 'string' || secret.length === 0) {
    throw new ComputeError(
      'MISSING_ENV',
      `${variable} is not set: the PKI bundle's private keys are sealed with it`,
      {
        hint: `Export ${variable} (the deployment secret, at least 16 characters) in the environment; it is never read from an argument.`,
      },
    );
  }
  return secret;
}

/**
 * Derives the 32-byte sealing key. Derivations are remembered per process by a hash of the secret
 * and the parameters (never the secret itself), so opening several keys of one bundle costs one
 * scrypt.
 */
const derived = new Map<string, Promise<Buffer>>();

function sealingKey(secret: string, params: SealParams): Promise<Buffer> {
  const id = createHash('sha256')
    .update(JSON.stringify([params.kdf, params.N, params.r, params.p, params.salt]))
    .update('\0')
    .update(secret)
    .digest('base64');
  let key = derived.get(id);
  if (!key) {
    key = new Promise<Buffer>((resolve, reject) => {
      scrypt(
        secret,
        Buffer.from(params.salt, 'base64'),
        32,
        { N: params.N, r: params.r, p: params.p, maxmem: 256 * params.N * params.r + 8 * 1024 * 1024 },
        (error, value) => (error ? reject(error) : resolve(value)),
      );
    });
    derived.set(id, key);
    key.catch(() => derived.delete(id));
    if (derived.size > 32) derived.delete(derived.keys().next().value!);
  }
  return key;
}

/** The associated data of a sealed key: the format, its purpose and the pin of its public half. */
function sealAad(purpose: KeyPurpose, pin: string, version = SEAL_VERSION): Buffer {
  return Buffer.from(`better-compute.pki.sealed-key.v${version}\0${purpose}\0${pin}`, 'utf8');
}

/** Seals `plaintext` (a PKCS#8 DER private key) for one purpose and pin. */
export async function seal(
  plaintext: Uint8Array,
  secret: string,
  params: SealParams,
  purpose: KeyPurpose,
  pin: string,
): Promise<SealedKey> {
  const key = await sealingKey(requireSecret(secret), params);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(sealAad(purpose, pin));
  const ct = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return {
    v: SEAL_VERSION,
    iv: iv.toString('base64'),
    ct: ct.toString('base64'),
    tag: cipher.getAuthTag().toString('base64'),
  };
}

/** Opens a sealed key; PKI_UNSEAL_FAILED when the secret, the slot or a byte is wrong. */
export async function unseal(
  sealed: SealedKey,
  secret: string | undefined,
  params: SealParams,
  purpose: KeyPurpose,
  pin: string,
): Promise<Buffer> {
  const key = await sealingKey(requireSecret(secret), params);
  if (sealed.v !== SEAL_VERSION) {
    throw new ComputeError(
      UNSEAL_FAILED,
      `the ${purpose} key is sealed in format ${String(sealed.v)}, unknown here`,
      {
        hint: 'Use the better-compute version that wrote the bundle, or one newer.',
      },
    );
  }
  try {
    const iv = Buffer.from(sealed.iv, 'base64');
    const tag = Buffer.from(sealed.tag, 'base64');
    if (iv.length !== 12 || tag.length !== 16) throw new Error('bad nonce or tag length');
    const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: 16 });
    decipher.setAAD(sealAad(purpose, pin, sealed.v));
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(Buffer.from(sealed.ct, 'base64')), decipher.final()]);
  } catch {
    throw new ComputeError(
      UNSEAL_FAILED,
      `the PKI bundle's ${purpose} key did not unseal: the secret is not the one it was sealed with, or the sealed key was altered or moved from another slot`,
      {
        hint: 'Set BETTER_COMPUTE_SECRET to the secret the bundle was sealed with ("better-compute pki reseal" changes it); a bundle edited by hand must be restored from a copy.',
        details: { purpose, pin },
      },
    );
  }
}
