/**
 * Sealing stored secrets the server must read back (webhook signing secrets): AES-256-GCM under a
 * key derived from the deployment's secret (BETTER_COMPUTE_SECRET) with scrypt, salted by purpose,
 * the owner bound as associated data so a sealed value copied to another row does not open. The
 * scheme Better IAM uses for TOTP seeds, with a salt per purpose so a value sealed for one purpose
 * never opens for another. Without a deployment secret values are
 * stored as `plain.…`, which `doctor` reports. Node only: imported as `@better-compute/core/sealing`
 * so the browser-facing entry point carries no node:crypto.
 */
import { createCipheriv, createDecipheriv, randomBytes, scryptSync } from 'node:crypto';
import { ComputeError } from './errors.js';

export interface Sealer {
  /** Whether values are sealed (a deployment secret is set). */
  readonly sealed: boolean;
  seal(plain: string, boundTo: string): string;
  open(stored: string, boundTo: string): string;
}

/**
 * A sealer for one purpose (`webhook secrets`). The key is derived on first use: scrypt is slow on
 * purpose, and a deployment that never seals anything should not pay for it at start.
 */
export function createSealer(secret: string | undefined, purpose: string): Sealer {
  return sealerWithSalt(secret, `better-compute sealed ${purpose} v1`);
}

export interface SealerOptions {
  /** Derive the key now rather than on first use (a server that will need it at once). */
  eager?: boolean;
  /** Read a stored value without a version and without `plain.` as the value itself (old rows). */
  acceptBare?: boolean;
}

/** The same sealer under a salt of the caller's (Better IAM keeps the salt its rows were sealed under). */
export function sealerWithSalt(
  secret: string | undefined,
  salt: string,
  options: SealerOptions = {},
): Sealer {
  let key: Buffer | null | undefined;
  const keyOf = (): Buffer | null => {
    if (key === undefined)
      key = secret
        ? scryptSync(secret, salt, 32, { N: 1 << 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 })
        : null;
    return key;
  };
  if (options.eager) keyOf();
  return {
    sealed: Boolean(secret),
    seal(plain, boundTo) {
      const k = keyOf();
      if (!k) return `plain.${plain}`;
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', k, iv);
      cipher.setAAD(Buffer.from(boundTo));
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return ['v1', iv, body, cipher.getAuthTag()]
        .map((part) => (typeof part === 'string' ? part : part.toString('base64url')))
        .join('.');
    },
    open(stored, boundTo) {
      if (stored.startsWith('plain.')) return stored.slice('plain.'.length);
      if (options.acceptBare && !stored.includes('.')) return stored;
      const [version, iv, body, tag] = stored.split('.');
      if (version !== 'v1' || !iv || !body || !tag) throw unreadable();
      const k = keyOf();
      if (!k)
        throw new ComputeError(
          'INVALID_CONFIG',
          'a sealed secret is stored, and this deployment has no secret to open it',
          { hint: 'Start the server with the BETTER_COMPUTE_SECRET it was sealed under.' },
        );
      try {
        const decipher = createDecipheriv('aes-256-gcm', k, Buffer.from(iv, 'base64url'));
        decipher.setAAD(Buffer.from(boundTo));
        decipher.setAuthTag(Buffer.from(tag, 'base64url'));
        return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString(
          'utf8',
        );
      } catch {
        throw unreadable();
      }
    },
  };
}

function unreadable(): ComputeError {
  return new ComputeError('INVALID_CONFIG', 'a sealed secret does not open under this deployment’s secret', {
    hint: 'Start the server with the BETTER_COMPUTE_SECRET it was sealed under.',
  });
}
