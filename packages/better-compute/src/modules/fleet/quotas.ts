/** Quotas: the limits a pool's owner sets on what a tenant may hold in it, and what it holds now. */
import { ComputeError } from '@better-compute/core';
import { sql } from 'kysely';
import type { CallContext } from '../define-module.js';
import { checkVersion, iso } from './common.js';
import { archived, offeredCan, ownedPool, visiblePool } from './pools.js';
import { type FleetDb, fleetDb } from './tables.js';

/** GPUs and reservations a tenant holds on a pool: queued and active (or active only). */
export async function heldBy(
  db: FleetDb,
  tenantId: string,
  poolId: string,
  activeOnly: boolean,
): Promise<{ gpus: number; reservations: number }> {
  let query = db
    .selectFrom('compute.reservations')
    .select([
      sql<number>`coalesce(sum(gpus), 0)::int`.as('gpus'),
      sql<number>`count(*)::int`.as('reservations'),
    ])
    .where('pool_id', '=', poolId)
    .where('tenant_id', '=', tenantId);
  query = activeOnly ? query.where('state', '=', 'active') : query.where('state', 'in', ['queued', 'active']);
  const row = await query.executeTakeFirstOrThrow();
  return { gpus: Number(row.gpus), reservations: Number(row.reservations) };
}

/** A tenant's limits on a pool; with `lock`, its quota rows stay locked until the transaction ends. */
export async function quotaLimits(
  db: FleetDb,
  tenantId: string,
  poolId: string,
  lock = false,
): Promise<{ gpus: number | null; reservations: number | null }> {
  let query = db
    .selectFrom('compute.quotas')
    .select(['resource', 'limit_value'])
    .where('tenant_id', '=', tenantId)
    .where('pool_id', '=', poolId)
    .orderBy('resource');
  if (lock) query = query.forUpdate();
  const rows = await query.execute();
  const limits = { gpus: null as number | null, reservations: null as number | null };
  for (const row of rows) if (row.limit_value !== null) limits[row.resource] = Number(row.limit_value);
  return limits;
}

export async function getQuotas(ctx: CallContext<{ poolId: string; subjectTenantId?: string | undefined }>) {
  const db = fleetDb(ctx.db);
  const subject = ctx.input.subjectTenantId ?? ctx.tenantId;
  const { owner } = await visiblePool(db, ctx.tenantId, ctx.input.poolId);
  if (subject !== ctx.tenantId && !owner) {
    throw new ComputeError('ACCESS_DENIED', 'only the pool’s owner reads other tenants’ quotas', {
      details: { reason: 'not-owner', poolId: ctx.input.poolId },
      hint: `The pool's owner sets and reads every tenant's quotas on it. ${offeredCan(ctx.input.poolId)}`,
    });
  }
  // Asked only of the owner, as quotas.set does: a mistyped subject is NOT_FOUND, not an empty quota.
  if (subject !== ctx.tenantId && !(await ctx.tenantExists(subject))) {
    throw new ComputeError('NOT_FOUND', `tenant ${subject} does not exist`, {
      details: { id: subject, field: 'subjectTenantId' },
      hint: 'Name a tenant by its id in Better IAM, such as acme.',
    });
  }
  const rows = await db
    .selectFrom('compute.quotas')
    .selectAll()
    .where('tenant_id', '=', subject)
    .where('pool_id', '=', ctx.input.poolId)
    .execute();
  const held = await heldBy(db, subject, ctx.input.poolId, false);
  return {
    items: (['gpus', 'reservations'] as const).map((resource) => {
      const row = rows.find((r) => r.resource === resource);
      return {
        tenantId: subject,
        poolId: ctx.input.poolId,
        resource,
        limit: row?.limit_value == null ? null : Number(row.limit_value),
        used: held[resource],
        version: row?.version ?? 0,
        updatedAt: row ? iso(row.updated_at) : null,
      };
    }),
    nextCursor: null,
  };
}

export async function setQuota(
  ctx: CallContext<{
    poolId: string;
    subjectTenantId: string;
    resource: 'gpus' | 'reservations';
    limit: number | null;
    ifVersion?: number | undefined;
  }>,
) {
  const db = fleetDb(ctx.db);
  const { input } = ctx;
  const pool = await ownedPool(db, ctx.tenantId, input.poolId);
  // An archived pool takes no new work, so a limit on it would govern nothing: setting one is
  // refused, clearing one (it only removes) is allowed. Read without the pool's lock, which would
  // queue behind reservations: a quota set as the pool is archived changes nothing it runs.
  if (input.limit !== null && pool.state !== 'active') throw archived(pool);
  const current = await db
    .selectFrom('compute.quotas')
    .selectAll()
    .where('tenant_id', '=', input.subjectTenantId)
    .where('pool_id', '=', input.poolId)
    .where('resource', '=', input.resource)
    .forUpdate()
    .executeTakeFirst();
  checkVersion('quota', `${input.subjectTenantId}/${input.resource}`, current?.version ?? 0, input.ifVersion);
  const now = ctx.now();
  const held = await heldBy(db, input.subjectTenantId, input.poolId, false);
  // The limit it has already (none included): nothing changes, no version, no event.
  const limitNow = current?.limit_value == null ? null : Number(current.limit_value);
  if (limitNow === input.limit) {
    return {
      tenantId: input.subjectTenantId,
      poolId: input.poolId,
      resource: input.resource,
      limit: input.limit,
      used: held[input.resource],
      version: current?.version ?? 0,
      updatedAt: current ? iso(current.updated_at) : null,
    };
  }
  // A cleared quota keeps its row (no limit), so its version goes on counting and an --if-version
  // read before the clearing cannot pass after a new limit is set.
  let version: number;
  if (current) {
    version = current.version + 1;
    await db
      .updateTable('compute.quotas')
      .set({ limit_value: input.limit, version, updated_at: now })
      .where('tenant_id', '=', input.subjectTenantId)
      .where('pool_id', '=', input.poolId)
      .where('resource', '=', input.resource)
      .execute();
  } else {
    version = 1;
    await db
      .insertInto('compute.quotas')
      .values({
        tenant_id: input.subjectTenantId,
        pool_id: input.poolId,
        resource: input.resource,
        limit_value: input.limit,
        updated_at: now,
      })
      .execute();
  }
  ctx.emit({
    type: 'quota.set',
    subject: { type: 'pool', id: input.poolId },
    data: { tenantId: input.subjectTenantId, resource: input.resource, limit: input.limit },
  });
  return {
    tenantId: input.subjectTenantId,
    poolId: input.poolId,
    resource: input.resource,
    limit: input.limit,
    used: held[input.resource],
    version,
    updatedAt: iso(now),
  };
}
