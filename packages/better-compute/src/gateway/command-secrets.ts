/**
 * Secrets into the commands that use them, as they are signed for the node: a sandbox's start
 * carries its environment as references (`secret://TENANT/sec_…`) in the database, and the gateway
 * opens each one as the sandbox's own tenant's and puts the value in the signed message only. The
 * row, its events and the workflow keep the references (docs/secrets.md). A bare-metal machine's
 * BMC command (metal.bmc) gets its BMC password the same way: opened from the machine's sealed row
 * only for the site agent of the machine's own site and tenant (docs/metal.md).
 */
import { toComputeError } from '@better-compute/core';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import type { CommandRow } from '../modules/commands/index.js';
import { sandboxTenant } from '../modules/sandboxes/index.js';
import { createBmcSealer, machineForBmc } from '../modules/metal/index.js';
import { isSiteAgentOf } from '../modules/fleet/index.js';
import { createSecretSealer, openSecretEnv, type SecretEnvReference } from '../modules/secrets/index.js';

type EnvEntry = SecretEnvReference | { name: string; value: string };

/** The payload to sign, or why the command cannot be sent (never a value). */
export type Resolved = { payload: Record<string, unknown> } | { error: string };

export function createCommandSecrets(deploymentSecret: string | undefined) {
  const sealer = createSecretSealer(deploymentSecret);
  const bmcSealer = createBmcSealer(deploymentSecret);
  /**
   * The BMC password of the machine a metal.bmc command names, for the node it goes to only when
   * that node is the site agent of the machine's site in the machine's tenant: a command row
   * written to any other node (or naming another tenant's machine) is not given it.
   */
  async function resolveBmc(db: Kysely<ComputeTables>, row: CommandRow): Promise<Resolved> {
    const payload = row.payload as { machineId?: unknown; bmc?: Record<string, unknown> };
    if (typeof payload.machineId !== 'string' || typeof payload.bmc !== 'object' || payload.bmc === null)
      return { error: 'it names no machine' };
    const machine = await machineForBmc(db, payload.machineId);
    if (!machine) return { error: 'its machine is unknown, so its BMC password is not opened' };
    if (!(await isSiteAgentOf(db, row.node_id, machine.tenant_id, machine.site_id)))
      return { error: 'its node is not the site agent of the machine’s site' };
    try {
      const password = bmcSealer.open(machine.bmc_password_sealed, machine.tenant_id, machine.id);
      return { payload: { ...row.payload, bmc: { ...payload.bmc, password } } };
    } catch (error) {
      return { error: `the BMC password could not be opened: ${toComputeError(error).message}` };
    }
  }
  return {
    /** Whether the command names secrets the gateway must open before it goes out. */
    needs(row: CommandRow): boolean {
      if (row.kind === 'metal.bmc') return true;
      const env = (row.payload as { env?: unknown }).env;
      return row.kind === 'sandbox.create' && Array.isArray(env) && env.length > 0;
    },
    async resolve(db: Kysely<ComputeTables>, row: CommandRow): Promise<Resolved> {
      if (row.kind === 'metal.bmc') return resolveBmc(db, row);
      const payload = row.payload as { sandboxId?: unknown; env: EnvEntry[] };
      try {
        const tenantId =
          typeof payload.sandboxId === 'string' ? await sandboxTenant(db, payload.sandboxId) : null;
        if (tenantId === null) return { error: 'its sandbox is unknown, so its secrets are not opened' };
        const refs = payload.env.filter((entry): entry is SecretEnvReference => 'secretRef' in entry);
        // A stored value (never written by this control plane) is not passed on.
        if (refs.length !== payload.env.length)
          return { error: 'its environment holds values, not references' };
        const env = await openSecretEnv(db, sealer, tenantId, refs);
        return { payload: { ...row.payload, env } };
      } catch (error) {
        return { error: `its secrets could not be opened: ${toComputeError(error).message}` };
      }
    },
  };
}
