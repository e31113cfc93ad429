/**
 * Instance quotas: what a pool's owner lets a tenant hold in instances on the pool (instances,
 * vCPUs, memory), beside the GPU quotas of the `quotas` group. A GPU flavor's GPUs count under
 * those, through the reservation its instance holds. Every instance not deleted counts.
 */
import { sql } from 'kysely';
import { resourceQuotas } from '../fleet/resource-quotas.js';
import { vpsDb } from './tables.js';

export const instanceQuotas = resourceQuotas({
  table: 'compute.instance_quotas',
  resources: ['instances', 'vcpus', 'memoryMiB'] as const,
  async holdings(db, tenantId, poolId) {
    const row = await vpsDb(db)
      .selectFrom('compute.instances')
      .select([
        sql<number>`count(*)::int`.as('instances'),
        sql<number>`coalesce(sum(vcpus), 0)::int`.as('vcpus'),
        sql<number>`coalesce(sum(memory_mib), 0)::int`.as('memory'),
      ])
      .where('tenant_id', '=', tenantId)
      .where('pool_id', '=', poolId)
      .where('state', '<>', 'deleted')
      .executeTakeFirstOrThrow();
    return { instances: Number(row.instances), vcpus: Number(row.vcpus), memoryMiB: Number(row.memory) };
  },
  what: 'instances',
  hint: 'Delete an instance, pick a smaller flavor, or ask the pool’s owner for more (instances.setQuota).',
  event: 'quota.set',
});
