/**
 * Where secrets are used: a reference (`secret://TENANT/sec_…`) is checked where a resource names
 * it (a template's env: it must be the resource's own tenant's, and exist), and opened only where
 * the resource is started (the gateway, as it signs a sandbox's start for its node). Opening asks
 * for the tenant the using resource belongs to, so a reference to another tenant's secret never
 * opens, whatever the row that holds it says.
 */
import { ComputeError } from '@better-compute/core';
import { MAX_SANDBOX_ENV_BYTES } from '@better-compute/core/runtime-commands';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { SecretSealer } from './sealing.js';
import { secretsDb } from './tables.js';

const REFERENCE = /^secret:\/\/([a-z0-9][a-z0-9-]{0,62})\/(sec_[0-9a-z]{26})$/;

/** A reference's tenant and id; null when it is not one. */
export function parseSecretReference(reference: string): { tenantId: string; id: string } | null {
  const match = REFERENCE.exec(reference);
  return match ? { tenantId: match[1]!, id: match[2]! } : null;
}

export interface SecretEnvReference {
  name: string;
  secretRef: string;
}

function otherTenant(entry: SecretEnvReference, tenantId: string): ComputeError {
  return new ComputeError(
    'INVALID_ARGUMENT',
    `${entry.name} names a secret of another tenant; a resource of ${tenantId} uses ${tenantId}'s secrets only`,
    {
      details: { field: 'env', name: entry.name },
      hint: `Put the secret in ${tenantId} (better-compute secrets put NAME --stdin) and name secret://${tenantId}/sec_….`,
    },
  );
}

/**
 * Checks that every reference is the tenant's own and names a secret that exists; answers the ids
 * and the values' total size. `code` is what a missing secret is: NOT_FOUND where the reference is
 * given (a template), INVALID_STATE where an earlier one is used (a sandbox's start).
 */
export async function checkSecretReferences(
  db: Kysely<ComputeTables>,
  tenantId: string,
  env: readonly SecretEnvReference[],
  code: 'NOT_FOUND' | 'INVALID_STATE' = 'NOT_FOUND',
): Promise<{ ids: string[]; bytes: number }> {
  if (env.length === 0) return { ids: [], bytes: 0 };
  const ids: string[] = [];
  for (const entry of env) {
    const ref = parseSecretReference(entry.secretRef);
    if (!ref || ref.tenantId !== tenantId) throw otherTenant(entry, tenantId);
    ids.push(ref.id);
  }
  const rows = await secretsDb(db)
    .selectFrom('compute.secrets')
    .select(['id', 'size_bytes'])
    .where('tenant_id', '=', tenantId)
    .where('id', 'in', [...new Set(ids)])
    .execute();
  const sizes = new Map(rows.map((row) => [row.id, row.size_bytes]));
  let bytes = 0;
  for (const [index, entry] of env.entries()) {
    const size = sizes.get(ids[index]!);
    if (size === undefined)
      throw new ComputeError(
        code,
        `secret ${ids[index]} (named by ${entry.name}) does not exist in tenant ${tenantId}`,
        {
          details: { field: 'env', name: entry.name, id: ids[index] },
          hint: 'Put it (better-compute secrets put NAME --stdin) and name the id it answers, or change the env.',
        },
      );
    bytes += size + entry.name.length + 1;
  }
  if (bytes > MAX_SANDBOX_ENV_BYTES)
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `the environment's secrets hold ${bytes} bytes, more than the ${MAX_SANDBOX_ENV_BYTES} a sandbox takes`,
      {
        details: { field: 'env', bytes, limit: MAX_SANDBOX_ENV_BYTES },
        hint: 'Name fewer or smaller secrets.',
      },
    );
  return { ids, bytes };
}

/**
 * The values of `env` for a resource of `tenantId`, opened: for the message that starts it on its
 * node, and nothing else. Fails, naming the variable and never a value, when a reference is not the
 * tenant's, its secret is gone, or it does not open.
 */
export async function openSecretEnv(
  db: Kysely<ComputeTables>,
  sealer: SecretSealer,
  tenantId: string,
  env: readonly SecretEnvReference[],
): Promise<{ name: string; value: string }[]> {
  await checkSecretReferences(db, tenantId, env, 'INVALID_STATE');
  const ids = env.map((entry) => parseSecretReference(entry.secretRef)!.id);
  const rows = await secretsDb(db)
    .selectFrom('compute.secrets')
    .select(['id', 'tenant_id', 'version', 'sealed'])
    .where('tenant_id', '=', tenantId)
    .where('id', 'in', [...new Set(ids)])
    .execute();
  const byId = new Map(rows.map((row) => [row.id, row]));
  return env.map((entry, index) => {
    const row = byId.get(ids[index]!);
    if (!row)
      throw new ComputeError('INVALID_STATE', `secret ${ids[index]} (named by ${entry.name}) was deleted`, {
        details: { field: 'env', name: entry.name, id: ids[index] },
      });
    return {
      name: entry.name,
      value: sealer.open(row.sealed, { tenantId: row.tenant_id, id: row.id, version: row.version }),
    };
  });
}

/**
 * When the newest of the secrets `env` names last changed (a put, or its creation); null for none.
 * A warm sandbox started before then holds an old value: it is not claimed, and the pool replaces it.
 */
export async function secretsChangedAt(
  db: Kysely<ComputeTables>,
  tenantId: string,
  env: readonly SecretEnvReference[],
): Promise<Date | null> {
  const ids = env.flatMap((entry) => {
    const ref = parseSecretReference(entry.secretRef);
    return ref && ref.tenantId === tenantId ? [ref.id] : [];
  });
  if (ids.length === 0) return null;
  const row = await secretsDb(db)
    .selectFrom('compute.secrets')
    .select((eb) => eb.fn.max('updated_at').as('changed'))
    .where('tenant_id', '=', tenantId)
    .where('id', 'in', [...new Set(ids)])
    .executeTakeFirst();
  return row?.changed ? new Date(row.changed) : null;
}
