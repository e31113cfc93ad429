/**
 * Secrets IAM must read back (TOTP seeds) are sealed at rest: AES-256-GCM under a key derived from
 * the deployment's secret (BETTER_COMPUTE_SECRET) with scrypt, the purpose and the owner bound as
 * associated data, so a sealed value copied to another principal's row does not open. A deployment
 * without a secret stores them as `plain.` values, which `doctor` reports; sealed values carry their
 * format version, so the format can change without a migration.
 */
import { createCipheriv, createDecipheriv, randomBytes, scryptSync } from 'node:crypto';
import { ComputeError } from '@better-compute/core';

export interface Sealer {
  /** Whether values are sealed (a deployment secret is set). */
  readonly sealed: boolean;
  seal(plain: string, boundTo: string): string;
  open(stored: string, boundTo: string): string;
}

const SALT = 'better-iam sealed secrets v1';

export function createSealer(secret: string | undefined): Sealer {
  // Derived once, at start: scrypt is slow on purpose.
  const key = secret
    ? scryptSync(secret, SALT, 32, { N: 1 << 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 })
    : null;
  return {
    sealed: key !== null,
    seal(plain, boundTo) {
      if (!key) return `plain.${plain}`;
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(boundTo));
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return ['v1', iv, body, cipher.getAuthTag()]
        .map((part) => (typeof part === 'string' ? part : part.toString('base64url')))
        .join('.');
    },
    open(stored, boundTo) {
      if (stored.startsWith('plain.')) return stored.slice('plain.'.length);
      // Values written before sealing existed: a bare base32 seed.
      if (!stored.includes('.')) return stored;
      const [version, iv, body, tag] = stored.split('.');
      if (version !== 'v1' || !iv || !body || !tag) throw unreadable();
      if (!key)
        throw new ComputeError(
          'INVALID_CONFIG',
          'a sealed secret is stored, and this deployment has no secret to open it',
          {
            hint: 'Start the server with the BETTER_COMPUTE_SECRET it was sealed under.',
          },
        );
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
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
