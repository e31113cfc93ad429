/**
 * Tenants: create (by an operator, or by a tenant's administrators under their own when the
 * deployment allows child tenants), read, list, and the state changes suspend, reactivate, delete.
 * `tenantState` is the bridge's cached answer for compute's pipeline.
 */
import { sql } from 'kysely';
import { ComputeError, isTenantId, ROOT_TENANT, type TenantState } from '@better-compute/core';
import type { Iam } from '../api.js';
import {
  change,
  countOf,
  type Db,
  type IamContext,
  isUniqueViolation,
  notFound,
  underLimit,
} from '../context.js';
import type { RouteBinding, RouteBindings } from '../routes.js';
import { requireIdentity } from '../routes.js';
import { pageOf, type TenantRow, toTenant } from '../rows.js';
import type { PageOptions, Tenant } from '../types.js';

export async function tenantRow(
  ctx: IamContext,
  tenantId: string,
  trx: Db = ctx.db,
): Promise<TenantRow | undefined> {
  return trx.selectFrom('iam.tenants').selectAll().where('id', '=', tenantId).executeTakeFirst();
}

async function requireTenant(ctx: IamContext, tenantId: string, trx: Db = ctx.db): Promise<TenantRow> {
  const row = isTenantId(tenantId) ? await tenantRow(ctx, tenantId, trx) : undefined;
  if (!row || row.state === 'deleted') throw notFound(`tenant ${tenantId}`);
  return row;
}

/** Serialises creates that count what a tenant holds (its principals, children, bindings). */
export async function lockTenant(tenantId: string, trx: Db): Promise<void> {
  await trx.selectFrom('iam.tenants').select('id').where('id', '=', tenantId).forUpdate().execute();
}

export async function requireActiveTenant(
  ctx: IamContext,
  tenantId: string,
  trx: Db = ctx.db,
): Promise<TenantRow> {
  const row = await requireTenant(ctx, tenantId, trx);
  if (row.state !== 'active') throw new ComputeError('TENANT_SUSPENDED', `tenant ${tenantId} is suspended`);
  return row;
}

async function setTenantState(
  ctx: IamContext,
  tenantId: string,
  from: TenantState[],
  to: TenantState,
): Promise<Tenant> {
  if (tenantId === ROOT_TENANT)
    throw new ComputeError('INVALID_STATE', 'the root tenant cannot be suspended or deleted');
  return change(ctx, async (trx) => {
    const row = await requireTenant(ctx, tenantId, trx);
    if (row.state === to) return { result: toTenant(row), changes: [] };
    if (!from.includes(row.state)) {
      throw new ComputeError('INVALID_STATE', `tenant ${tenantId} is ${row.state}`, {
        details: { state: row.state },
      });
    }
    if (to === 'deleted') {
      const child = await trx
        .selectFrom('iam.tenants')
        .select('id')
        .where('parent_id', '=', tenantId)
        .where('state', '<>', 'deleted')
        .executeTakeFirst();
      if (child) {
        throw new ComputeError('INVALID_STATE', `tenant ${tenantId} still has tenant ${child.id} under it`, {
          hint: `Delete tenant ${child.id} first.`,
        });
      }
    }
    const updated = await trx
      .updateTable('iam.tenants')
      .set({ state: to, updated_at: ctx.clock(), version: sql<number>`version + 1` })
      .where('id', '=', tenantId)
      .returningAll()
      .executeTakeFirstOrThrow();
    return { result: toTenant(updated), changes: [{ type: 'tenant', id: tenantId }] };
  });
}

export async function tenantState(ctx: IamContext, tenantId: string): Promise<TenantState | null> {
  const cached = ctx.cache.tenantState(tenantId);
  if (cached !== undefined) return cached;
  if (!isTenantId(tenantId)) return null;
  const generation = ctx.cache.generation;
  const row = await tenantRow(ctx, tenantId);
  const state = row?.state ?? null;
  ctx.cache.setTenantState(tenantId, state, generation);
  return state;
}

export async function createTenant(
  ctx: IamContext,
  input: { id: string; name: string; parentId?: string; byTenant?: string },
): Promise<Tenant> {
  if (!isTenantId(input.id))
    throw new ComputeError('INVALID_ARGUMENT', 'id must be a tenant id such as acme', {
      details: { field: 'id' },
    });
  const parentId = input.parentId ?? ROOT_TENANT;
  if (input.byTenant !== undefined && input.byTenant !== ROOT_TENANT) {
    if (ctx.limits.childTenantsPerTenant <= 0)
      throw new ComputeError('ACCESS_DENIED', 'only platform operators create tenants in this deployment', {
        details: { reason: 'tenant-creation-off' },
        hint: 'Ask a platform operator to create the tenant, or have the operator allow child tenants (iamLimits.childTenantsPerTenant).',
      });
    if (parentId !== input.byTenant)
      throw new ComputeError(
        'ACCESS_DENIED',
        `a tenant creates child tenants only under itself (${input.byTenant})`,
        {
          details: { reason: 'not-own-parent' },
          hint: `Pass --parent ${input.byTenant}, or leave it out.`,
        },
      );
  }
  try {
    return await ctx.db.transaction().execute(async (trx) => {
      await requireActiveTenant(ctx, parentId, trx);
      if (input.byTenant !== undefined && input.byTenant !== ROOT_TENANT) {
        // A tenant's administrators create children only under their own tenant, up to the cap.
        await lockTenant(parentId, trx);
        await underLimit(ctx, 'childTenantsPerTenant', `tenant ${parentId}'s child tenants`, () =>
          countOf(
            trx
              .selectFrom('iam.tenants')
              .select((eb) => eb.fn.countAll().as('n'))
              .where('parent_id', '=', parentId)
              .where('state', '<>', 'deleted'),
          ),
        );
      }
      const now = ctx.clock();
      const row = await trx
        .insertInto('iam.tenants')
        .values({ id: input.id, parent_id: parentId, name: input.name, created_at: now, updated_at: now })
        .returningAll()
        .executeTakeFirstOrThrow();
      return toTenant(row);
    });
  } catch (error) {
    if (isUniqueViolation(error))
      throw new ComputeError('ALREADY_EXISTS', `tenant ${input.id} already exists`);
    throw error;
  }
}

type TenantMethods =
  | 'tenantState'
  | 'createTenant'
  | 'getTenant'
  | 'listTenants'
  | 'suspendTenant'
  | 'reactivateTenant'
  | 'deleteTenant';

export function tenantService(ctx: IamContext): Pick<Iam, TenantMethods> {
  return {
    tenantState: (tenantId) => tenantState(ctx, tenantId),
    createTenant: (input) => createTenant(ctx, input),
    async getTenant(tenantId) {
      const row = isTenantId(tenantId) ? await tenantRow(ctx, tenantId) : undefined;
      if (!row) throw notFound(`tenant ${tenantId}`);
      return toTenant(row);
    },
    async listTenants(input: { parentId?: string } & PageOptions = {}) {
      const limit = input.limit ?? 50;
      let query = ctx.db
        .selectFrom('iam.tenants')
        .selectAll()
        .orderBy('id')
        .limit(limit + 1);
      if (input.parentId !== undefined) query = query.where('parent_id', '=', input.parentId);
      if (input.cursor !== undefined) query = query.where('id', '>', input.cursor);
      return pageOf((await query.execute()).map(toTenant), limit);
    },
    suspendTenant: (tenantId) => setTenantState(ctx, tenantId, ['active'], 'suspended'),
    reactivateTenant: (tenantId) => setTenantState(ctx, tenantId, ['suspended'], 'active'),
    deleteTenant: (tenantId) => setTenantState(ctx, tenantId, ['active', 'suspended'], 'deleted'),
  };
}

function tenantStateBinding<K extends 'tenants.suspend' | 'tenants.reactivate' | 'tenants.delete'>(
  iam: Iam,
  apply: (tenantId: string) => Promise<unknown>,
): RouteBinding<K> {
  return {
    // Decided in the parent tenant: a tenant's own admins cannot suspend or delete it.
    async resource(input: { id: string }) {
      const tenant = await iam.getTenant(input.id);
      return { type: 'iam-tenant', id: input.id, tenantId: tenant.parentId ?? ROOT_TENANT };
    },
    async run(input: { id: string }) {
      return { data: await apply(input.id) };
    },
  };
}

export function tenantRoutes(
  iam: Iam,
): RouteBindings<
  | 'tenants.create'
  | 'tenants.get'
  | 'tenants.list'
  | 'tenants.suspend'
  | 'tenants.reactivate'
  | 'tenants.delete'
> {
  return {
    'tenants.create': {
      resource: (input, { identity }) => ({
        type: 'iam-tenant',
        tenantId: input.parentId ?? identity.tenantId,
      }),
      async run(input, context) {
        const byTenant = requireIdentity(context).tenantId;
        const parentId = input.parentId ?? byTenant;
        return { data: await iam.createTenant({ id: input.id, name: input.name, parentId, byTenant }) };
      },
    },
    'tenants.get': {
      resource: (_input, { tenantId }) => ({ type: 'iam-tenant', id: tenantId, tenantId }),
      async run(_input, { tenantId }) {
        return { data: await iam.getTenant(tenantId) };
      },
    },
    'tenants.list': {
      resource: (_input, { tenantId }) => ({ type: 'iam-tenant', tenantId }),
      async run(input, { tenantId }) {
        const page = { limit: input.limit, ...(input.cursor ? { cursor: input.cursor } : {}) };
        return {
          data: await iam.listTenants(tenantId === ROOT_TENANT ? page : { ...page, parentId: tenantId }),
        };
      },
    },
    'tenants.suspend': tenantStateBinding(iam, (id) => iam.suspendTenant(id)),
    'tenants.reactivate': tenantStateBinding(iam, (id) => iam.reactivateTenant(id)),
    'tenants.delete': tenantStateBinding(iam, (id) => iam.deleteTenant(id)),
  };
}
