/**
 * BMC passwords at rest: sealed under the deployment secret (AES-256-GCM, core's sealing.ts) for
 * this purpose alone, bound to the tenant and machine as associated data, so a sealed value copied
 * to another machine's row does not open. Without a deployment secret nothing is enrolled: a BMC
 * password is never kept unsealed.
 */
import { ComputeError } from '@better-compute/core';
import { createSealer } from '@better-compute/core/sealing';

const boundTo = (tenantId: string, machineId: string) => `better-compute bmc ${tenantId}/${machineId}`;

export interface BmcSealer {
  seal(password: string, tenantId: string, machineId: string): string;
  open(sealed: string, tenantId: string, machineId: string): string;
}

function noSecret(): ComputeError {
  return new ComputeError('INVALID_CONFIG', 'this deployment has no secret to seal BMC passwords with', {
    details: { reason: 'no-deployment-secret' },
    hint: 'An operator starts the server with BETTER_COMPUTE_SECRET set (secret in the configuration); see docs/metal.md.',
  });
}

export function createBmcSealer(deploymentSecret: string | undefined): BmcSealer {
  const sealer = createSealer(deploymentSecret, 'metal bmc passwords');
  return {
    seal(password, tenantId, machineId) {
      if (!sealer.sealed) throw noSecret();
      return sealer.seal(password, boundTo(tenantId, machineId));
    },
    open(sealed, tenantId, machineId) {
      if (!sealer.sealed) throw noSecret();
      // Only what seal() wrote: a `plain.` value is never taken for a password.
      if (!sealed.startsWith('v1.'))
        throw new ComputeError('INVALID_CONFIG', `the BMC password of ${machineId} is not sealed`);
      return sealer.open(sealed, boundTo(tenantId, machineId));
    },
  };
}
