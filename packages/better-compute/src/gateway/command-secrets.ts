/**
 * Secrets into the commands that use them, as they are signed for the node: a sandbox's start
 * carries its environment as references (`secret://TENANT/sec_…`) in the database, and the gateway
 * opens each one as the sandbox's own tenant's and puts the value in the signed message only. The
 * row, its events and the workflow keep the references (docs/secrets.md).
 */
import { toComputeError } from '@better-compute/core';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import type { CommandRow } from '../modules/commands/index.js';
import { sandboxTenant } from '../modules/sandboxes/index.js';
import { createSecretSealer, openSecretEnv, type SecretEnvReference } from '../modules/secrets/index.js';

type EnvEntry = SecretEnvReference | { name: string; value: string };

/** The payload to sign, or why the command cannot be sent (never a value). */
export type Resolved = { payload: Record<string, unknown> } | { error: string };

export function createCommandSecrets(deploymentSecret: string | undefined) {
  const sealer = createSecretSealer(deploymentSecret);
  return {
    /** Whether the command names secrets the gateway must open before it goes out. */
    needs(row: CommandRow): boolean {
      const env = (row.payload as { env?: unknown }).env;
      return row.kind === 'sandbox.create' && Array.isArray(env) && env.length > 0;
    },
    async resolve(db: Kysely<ComputeTables>, row: CommandRow): Promise<Resolved> {
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
