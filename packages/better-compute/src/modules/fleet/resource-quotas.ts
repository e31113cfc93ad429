/**
 * Quotas on what a tenant holds on a pool beyond GPUs: instances or sandboxes, their vCPUs and
 * memory. A pool's owner sets a limit per tenant and resource (null: none); a create that would
 * pass one is QUOTA_EXCEEDED; reading another tenant's quotas is the owner's. The instances and
 * the sandboxes modules each keep a table of limits of this one shape and say what counts as held.
 */
import { ComputeError } from '@better-compute/core';
import type { CatalogEventDraft } from '@better-compute/events';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { CallContext } from '../define-module.js';
import { offeredCan, ownedPool, visiblePool } from './pools.js';
import { fleetDb } from './tables.js';

/** The limits' tables, one row per tenant, pool and resource. */
type QuotaTable = 'compute.instance_quotas' | 'compute.sandbox_quotas';

interface QuotaTables {
  'compute.instance_quotas': QuotaRow;
  'compute.sandbox_quotas': QuotaRow;
}
interface QuotaRow {
  tenant_id: string;
  pool_id: string;
  resource: string;
  limit_value: number | string | null;
  updated_at: Date;
}

export interface ResourceQuotas<R extends 'instances' | 'sandboxes' | 'vcpus' | 'memoryMiB'> {
  /** QUOTA_EXCEEDED when adding `more` to what the tenant holds on the pool passes a limit. */
  check(db: Kysely<ComputeTables>, tenantId: string, poolId: string, more: Record<R, number>): Promise<void>;
  /** The `quotas` method: every resource's limit and use, for the caller or (the owner) another tenant. */
  get(ctx: CallContext<{ poolId: string; subjectTenantId?: string | undefined }>): Promise<{
    items: { tenantId: string; poolId: string; resource: R; limit: number | null; used: number }[];
    nextCursor: null;
  }>;
  /** The `setQuota` method: the pool's owner sets one limit. */
  set(
    ctx: CallContext<{ poolId: string; subjectTenantId: string; resource: R; limit: number | null }>,
  ): Promise<{ tenantId: string; poolId: string; resource: R; limit: number | null; used: number }>;
}

export function resourceQuotas<R extends 'instances' | 'sandboxes' | 'vcpus' | 'memoryMiB'>(options: {
  table: QuotaTable;
  resources: readonly R[];
  /** What the tenant holds on the pool now, per resource. */
  holdings(db: Kysely<ComputeTables>, tenantId: string, poolId: string): Promise<Record<R, number>>;
  /** Held in what, for messages: "instances", "sandboxes". */
  what: string;
  /** What to do when a create is refused. */
  hint: string;
  event: 'quota.set' | 'sandbox-quota.set';
}): ResourceQuotas<R> {
  const { table, resources } = options;
  const quotaDb = (db: Kysely<ComputeTables>) => db as unknown as Kysely<QuotaTables>;

  async function limits(db: Kysely<ComputeTables>, tenantId: string, poolId: string) {
    const rows = await quotaDb(db)
      .selectFrom(table)
      .select(['resource', 'limit_value'])
      .where('tenant_id', '=', tenantId)
      .where('pool_id', '=', poolId)
      .execute();
    const found = Object.fromEntries(resources.map((r) => [r, null])) as Record<R, number | null>;
    for (const row of rows)
      if ((resources as readonly string[]).includes(row.resource))
        found[row.resource as R] = row.limit_value === null ? null : Number(row.limit_value);
    return found;
  }

  return {
    async check(db, tenantId, poolId, more) {
      const limit = await limits(db, tenantId, poolId);
      if (resources.every((r) => limit[r] === null)) return;
      const held = await options.holdings(db, tenantId, poolId);
      for (const resource of resources) {
        const max = limit[resource];
        if (max === null || more[resource] === 0) continue;
        if (held[resource] + more[resource] > max)
          throw new ComputeError(
            'QUOTA_EXCEEDED',
            `tenant ${tenantId} may hold ${max} ${resource} in ${options.what} on pool ${poolId}, holds ${held[resource]} and asks for ${more[resource]} more`,
            {
              details: { resource, limit: max, used: held[resource], requested: more[resource] },
              hint: options.hint,
            },
          );
      }
    },

    async get(ctx) {
      const subject = ctx.input.subjectTenantId ?? ctx.tenantId;
      const { owner } = await visiblePool(fleetDb(ctx.db), ctx.tenantId, ctx.input.poolId);
      if (subject !== ctx.tenantId && !owner)
        throw new ComputeError('ACCESS_DENIED', 'only the pool’s owner reads other tenants’ quotas', {
          details: { reason: 'not-owner', poolId: ctx.input.poolId },
          hint: offeredCan(ctx.input.poolId),
        });
      const limit = await limits(ctx.db, subject, ctx.input.poolId);
      const held = await options.holdings(ctx.db, subject, ctx.input.poolId);
      return {
        items: resources.map((resource) => ({
          tenantId: subject,
          poolId: ctx.input.poolId,
          resource,
          limit: limit[resource],
          used: held[resource],
        })),
        nextCursor: null,
      };
    },

    async set(ctx) {
      const { input } = ctx;
      await ownedPool(fleetDb(ctx.db), ctx.tenantId, input.poolId);
      const now = ctx.now();
      await quotaDb(ctx.db)
        .insertInto(table)
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
      // Both events carry the same payload; TypeScript cannot pair the union's type with its data.
      ctx.emit({
        type: options.event,
        subject: { type: 'pool', id: input.poolId },
        data: { tenantId: input.subjectTenantId, resource: input.resource, limit: input.limit },
      } as CatalogEventDraft);
      const held = await options.holdings(ctx.db, input.subjectTenantId, input.poolId);
      return {
        tenantId: input.subjectTenantId,
        poolId: input.poolId,
        resource: input.resource,
        limit: input.limit,
        used: held[input.resource],
      };
    },
  };
}
