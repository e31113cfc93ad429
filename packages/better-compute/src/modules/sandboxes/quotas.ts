/**
 * Sandbox quotas: what a pool's owner lets a tenant hold in sandboxes on the pool (sandboxes,
 * vCPUs, memory), in the shape of the instance quotas (vps/quotas.ts). Every sandbox not deleted
 * or failed counts, warm ones too: a warm pool holds its node's capacity as much as a claimed one.
 */
import { ComputeError } from '@better-compute/core';
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { CallContext } from '../define-module.js';
import { offeredCan, ownedPool, visiblePool } from '../fleet/pools.js';
import { asFleet, vpsDb } from '../vps/tables.js';
import { sandboxDb } from './tables.js';

type Resource = 'sandboxes' | 'vcpus' | 'memoryMiB';
const RESOURCES: readonly Resource[] = ['sandboxes', 'vcpus', 'memoryMiB'];

async function holdings(
  db: Kysely<ComputeTables>,
  tenantId: string,
  poolId: string,
): Promise<Record<Resource, number>> {
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
}

async function limits(
  db: Kysely<ComputeTables>,
  tenantId: string,
  poolId: string,
): Promise<Record<Resource, number | null>> {
  const rows = await sandboxDb(db)
    .selectFrom('compute.sandbox_quotas')
    .select(['resource', 'limit_value'])
    .where('tenant_id', '=', tenantId)
    .where('pool_id', '=', poolId)
    .execute();
  const found: Record<Resource, number | null> = { sandboxes: null, vcpus: null, memoryMiB: null };
  for (const row of rows) found[row.resource] = row.limit_value === null ? null : Number(row.limit_value);
  return found;
}

/** QUOTA_EXCEEDED when one more sandbox of this shape passes one of the tenant's limits on the pool. */
export async function checkSandboxQuota(
  db: Kysely<ComputeTables>,
  tenantId: string,
  poolId: string,
  shape: { vcpus: number; memoryMiB: number },
): Promise<void> {
  const limit = await limits(db, tenantId, poolId);
  if (RESOURCES.every((r) => limit[r] === null)) return;
  const held = await holdings(db, tenantId, poolId);
  const more: Record<Resource, number> = { sandboxes: 1, vcpus: shape.vcpus, memoryMiB: shape.memoryMiB };
  for (const resource of RESOURCES) {
    const max = limit[resource];
    if (max !== null && held[resource] + more[resource] > max)
      throw new ComputeError(
        'QUOTA_EXCEEDED',
        `tenant ${tenantId} may hold ${max} ${resource} in sandboxes on pool ${poolId}, holds ${held[resource]} and asks for ${more[resource]} more`,
        {
          details: { resource, limit: max, used: held[resource], requested: more[resource] },
          hint: 'Delete a sandbox, lower a template’s warm pool, or ask the pool’s owner for more (sandboxes.setQuota).',
        },
      );
  }
}

export async function getSandboxQuotas(
  ctx: CallContext<{ poolId: string; subjectTenantId?: string | undefined }>,
) {
  const subject = ctx.input.subjectTenantId ?? ctx.tenantId;
  const { owner } = await visiblePool(asFleet(vpsDb(ctx.db)), ctx.tenantId, ctx.input.poolId);
  if (subject !== ctx.tenantId && !owner)
    throw new ComputeError('ACCESS_DENIED', 'only the pool’s owner reads other tenants’ quotas', {
      details: { reason: 'not-owner', poolId: ctx.input.poolId },
      hint: offeredCan(ctx.input.poolId),
    });
  const limit = await limits(ctx.db, subject, ctx.input.poolId);
  const held = await holdings(ctx.db, subject, ctx.input.poolId);
  return {
    items: RESOURCES.map((resource) => ({
      tenantId: subject,
      poolId: ctx.input.poolId,
      resource,
      limit: limit[resource],
      used: held[resource],
    })),
    nextCursor: null,
  };
}

export async function setSandboxQuota(
  ctx: CallContext<{ poolId: string; subjectTenantId: string; resource: Resource; limit: number | null }>,
) {
  const { input } = ctx;
  await ownedPool(asFleet(vpsDb(ctx.db)), ctx.tenantId, input.poolId);
  const now = ctx.now();
  await sandboxDb(ctx.db)
    .insertInto('compute.sandbox_quotas')
    .values({
      tenant_id: input.subjectTenantId,
      pool_id: input.poolId,
      resource: input.resource,
      limit_value: input.limit,
      updated_at: now,
    })
    .onConflict((oc) =>
      oc
        .columns(['tenant_id', 'pool_id', 'resource'])
        .doUpdateSet({ limit_value: input.limit, updated_at: now }),
    )
    .execute();
  ctx.emit({
    type: 'sandbox-quota.set',
    subject: { type: 'pool', id: input.poolId },
    data: { tenantId: input.subjectTenantId, resource: input.resource, limit: input.limit },
  });
  const held = await holdings(ctx.db, input.subjectTenantId, input.poolId);
  return {
    tenantId: input.subjectTenantId,
    poolId: input.poolId,
    resource: input.resource,
    limit: input.limit,
    used: held[input.resource],
  };
}
