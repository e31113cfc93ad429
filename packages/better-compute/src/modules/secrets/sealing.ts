/**
 * Sealing secrets' values: AES-256-GCM under a key derived with scrypt from the deployment secret
 * (BETTER_COMPUTE_SECRET), the scheme webhook signing secrets and Better IAM's TOTP seeds use
 * (core's sealing.ts), salted for this purpose. Each value is bound to its tenant, id and version as
 * associated data, so a sealed value copied to another row, or put back under a later version, does
 * not open. Unlike those, a secret is never stored unsealed: without a deployment secret `put`
 * refuses, and only the sealed form (`v1.…`) is ever opened.
 */
import { ComputeError } from '@better-compute/core';
import { createSealer, type Sealer } from '@better-compute/core/sealing';

export interface SecretSealer {
  /** Whether this deployment can seal at all (it has a deployment secret). */
  readonly available: boolean;
  seal(value: string, bound: SecretBinding): string;
  open(sealed: string, bound: SecretBinding): string;
}

interface SecretBinding {
  tenantId: string;
  id: string;
  version: number;
}

/** The associated data a value is sealed with: whose, which, and which version. */
const boundTo = (b: SecretBinding) => `better-compute secret ${b.tenantId}/${b.id}@${b.version}`;

export function noDeploymentSecret(): ComputeError {
  return new ComputeError(
    'INVALID_CONFIG',
    'this deployment has no secret to seal secrets with, so it keeps none',
    {
      details: { reason: 'no-deployment-secret' },
      hint: 'An operator starts the server with BETTER_COMPUTE_SECRET set (secret in the configuration); see docs/secrets.md.',
    },
  );
}

function unreadable(id: string): ComputeError {
  return new ComputeError('INVALID_CONFIG', `secret ${id} does not open under this deployment’s secret`, {
    details: { reason: 'secret-unreadable', id },
    hint: 'Start the server with the BETTER_COMPUTE_SECRET it was sealed under, or put the secret again.',
  });
}

export function createSecretSealer(deploymentSecret: string | undefined): SecretSealer {
  const sealer: Sealer = createSealer(deploymentSecret, 'tenant secrets');
  return {
    available: sealer.sealed,
    seal(value, bound) {
      if (!sealer.sealed) throw noDeploymentSecret();
      return sealer.seal(value, boundTo(bound));
    },
    open(sealed, bound) {
      if (!sealer.sealed) throw noDeploymentSecret();
      // Only what seal() wrote: a `plain.` row (which core's sealer would read as the value) is
      // refused, so a write to the table alone never chooses what a sandbox is given.
      if (!sealed.startsWith('v1.')) throw unreadable(bound.id);
      try {
        return sealer.open(sealed, boundTo(bound));
      } catch {
        throw unreadable(bound.id);
      }
    },
  };
}
