/**
 * Instance quotas: what a pool's owner lets a tenant hold in instances on the pool (instances,
 * vCPUs, memory), beside the GPU quotas of the `quotas` group. A GPU flavor's GPUs count under
 * those, through the reservation its instance holds.
 */
import { ComputeError } from '@better-compute/core';
import type { CallContext } from '../define-module.js';
import { offeredCan, ownedPool, visiblePool } from '../fleet/pools.js';

import { instanceHoldings, instanceLimits, type QuotaResource } from './placement.js';
import { vpsDb, asFleet } from './tables.js';

const RESOURCES: readonly QuotaResource[] = ['instances', 'vcpus', 'memoryMiB'];

export async function getInstanceQuotas(
  ctx: CallContext<{ poolId: string; subjectTenantId?: string | undefined }>,
) {
  const db = vpsDb(ctx.db);
  const subject = ctx.input.subjectTenantId ?? ctx.tenantId;
  const { owner } = await visiblePool(asFleet(db), ctx.tenantId, ctx.input.poolId);
  if (subject !== ctx.tenantId && !owner)
    throw new ComputeError('ACCESS_DENIED', 'only the pool’s owner reads other tenants’ quotas', {
      details: { reason: 'not-owner', poolId: ctx.input.poolId },
      hint: offeredCan(ctx.input.poolId),
    });
  const limits = await instanceLimits(db, subject, ctx.input.poolId);
  const held = await instanceHoldings(db, subject, ctx.input.poolId);
  return {
    items: RESOURCES.map((resource) => ({
      tenantId: subject,
      poolId: ctx.input.poolId,
      resource,
      limit: limits[resource],
      used: held[resource],
    })),
    nextCursor: null,
  };
}

export async function setInstanceQuota(
  ctx: CallContext<{
    poolId: string;
    subjectTenantId: string;
    resource: QuotaResource;
    limit: number | null;
  }>,
) {
  const db = vpsDb(ctx.db);
  const { input } = ctx;
  await ownedPool(asFleet(db), ctx.tenantId, input.poolId);
  const now = ctx.now();
  await db
    .insertInto('compute.instance_quotas')
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
    type: 'quota.set',
    subject: { type: 'pool', id: input.poolId },
    data: { tenantId: input.subjectTenantId, resource: input.resource, limit: input.limit },
  });
  const held = await instanceHoldings(db, input.subjectTenantId, input.poolId);
  return {
    tenantId: input.subjectTenantId,
    poolId: input.poolId,
    resource: input.resource,
    limit: input.limit,
    used: held[input.resource],
  };
}
