/**
 * Sandbox quotas: what a pool's owner lets a tenant hold in sandboxes on the pool (sandboxes,
 * vCPUs, memory), as the instance quotas are kept (fleet/resource-quotas.ts). Every sandbox not
 * deleted or failed counts, warm ones too: a warm pool holds its node's capacity as much as a
 * claimed one.
 */
import { sql } from 'kysely';
import { resourceQuotas } from '../fleet/resource-quotas.js';
import { sandboxDb } from './tables.js';

export const sandboxQuotas = resourceQuotas({
  table: 'compute.sandbox_quotas',
  resources: ['sandboxes', 'vcpus', 'memoryMiB'] as const,
  async holdings(db, tenantId, poolId) {
    const row = await sandboxDb(db)
      .selectFrom('compute.sandboxes')
      .select([
        sql<number>`count(*)::int`.as('sandboxes'),
        sql<number>`coalesce(sum(vcpus), 0)::int`.as('vcpus'),
        sql<number>`coalesce(sum(memory_mib), 0)::int`.as('memory'),
      ])
      .where('tenant_id', '=', tenantId)
      .where('pool_id', '=', poolId)
      .where('state', 'not in', ['deleted', 'failed'])
      .executeTakeFirstOrThrow();
    return { sandboxes: Number(row.sandboxes), vcpus: Number(row.vcpus), memoryMiB: Number(row.memory) };
  },
  what: 'sandboxes',
  hint: 'Delete a sandbox, lower a template’s warm pool, or ask the pool’s owner for more (sandboxes.setQuota).',
  event: 'sandbox-quota.set',
});
