/**
 * The platform must keep one way in: an enabled person of the root tenant holding platform-admin.
 * A change that could remove the last one (disabling a root person, revoking a root platform-admin
 * binding) first locks root's platform-admin bindings, so two such changes run one after the other
 * and the second sees the first, then refuses when none would be left.
 */
import { ComputeError, ROOT_TENANT } from '@better-compute/core';
import type { Db } from '../context.js';
import { BUILT_IN_ROLE_IDS } from '../migrations.js';

export async function lockPlatformAdmins(trx: Db): Promise<void> {
  await trx
    .selectFrom('iam.bindings')
    .select('id')
    .where('tenant_id', '=', ROOT_TENANT)
    .where('role_id', '=', BUILT_IN_ROLE_IDS['platform-admin'])
    .where('revoked_at', 'is', null)
    .forUpdate()
    .execute();
}

/** Whether an enabled person of the root tenant holds platform-admin. */
export async function rootAdministratorExists(executor: Db): Promise<boolean> {
  const row = await executor
    .selectFrom('iam.bindings as b')
    .innerJoin('iam.principals as p', 'p.id', 'b.principal_id')
    .select('b.id')
    .where('b.tenant_id', '=', ROOT_TENANT)
    .where('b.role_id', '=', BUILT_IN_ROLE_IDS['platform-admin'])
    .where('b.revoked_at', 'is', null)
    .where('p.disabled', '=', false)
    .where('p.kind', '=', 'person')
    .executeTakeFirst();
  return row !== undefined;
}

export async function assertPlatformKeepsAnAdmin(trx: Db, what: string): Promise<void> {
  if (!(await rootAdministratorExists(trx))) {
    throw new ComputeError('INVALID_STATE', `${what} would leave the platform without an administrator`, {
      details: { reason: 'last-platform-admin' },
      hint: 'Bind platform-admin to another enabled person of the root tenant first (better-iam bindings create --tenant root --role platform-admin).',
    });
  }
}
