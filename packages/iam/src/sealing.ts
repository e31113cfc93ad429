/**
 * Secrets IAM must read back (TOTP seeds) are sealed at rest with core's sealer: AES-256-GCM under a
 * key derived from the deployment's secret (BETTER_COMPUTE_SECRET) with scrypt, the owner bound as
 * associated data, so a sealed value copied to another principal's row does not open. A deployment
 * without a secret stores them as `plain.` values, which `doctor` reports; seeds stored before
 * sealing existed (bare base32) still read.
 */
import { type Sealer, sealerWithSalt } from '@better-compute/core/sealing';

export type { Sealer };

/** The salt IAM's rows are sealed under; changing it would make every sealed seed unreadable. */
const SALT = 'better-iam sealed secrets v1';

export function createSealer(secret: string | undefined): Sealer {
  // Derived once, at start: scrypt is slow on purpose.
  return sealerWithSalt(secret, SALT, { eager: true, acceptBare: true });
}
