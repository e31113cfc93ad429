/**
 * Authorize: decides checks for an identity from its principal's snapshot (bindings with their
 * compiled roles, and for an agent the snapshot of the person it acts for) and the tenants' states,
 * both from the auth cache when warm. The decision itself is `policy.ts`'s `decide`.
 */
import {
  type AuthorizationCheck,
  type AuthorizationDecision,
  type Identity,
  isTenantId,
  type TenantState,
} from '@better-compute/core';
import type { Iam } from '../api.js';
import type { IamContext } from '../context.js';
import {
  compilePattern,
  decide,
  type PolicyBinding,
  type PolicyRole,
  type PrincipalSnapshot,
} from '../policy.js';
import { requireIdentity, type RouteBindings } from '../routes.js';
import type { RoleRow } from '../rows.js';
import { principalRow } from './principals.js';

function compiledRole(ctx: IamContext, row: Omit<RoleRow, 'description'>): PolicyRole {
  const key = `${row.id}\n${row.actions.join('\n')}`;
  let role = ctx.rolePatterns.get(key);
  if (!role) {
    role = {
      id: row.id,
      name: row.name,
      tenantId: row.tenant_id,
      patterns: row.actions.map(compilePattern),
    };
    if (ctx.rolePatterns.size > 10_000) ctx.rolePatterns.clear();
    ctx.rolePatterns.set(key, role);
  }
  return role;
}

async function loadSnapshot(
  ctx: IamContext,
  principalId: string,
  depth = 0,
): Promise<PrincipalSnapshot | null> {
  const row = await principalRow(ctx, principalId);
  if (!row) return null;
  const rows = await ctx.db
    .selectFrom('iam.bindings as b')
    .innerJoin('iam.roles as r', 'r.id', 'b.role_id')
    .select([
      'b.id',
      'b.tenant_id',
      'b.principal_id',
      'b.group_id',
      'b.scope_type',
      'b.scope_id',
      'b.scope_resource_type',
      'r.id as role_id',
      'r.name as role_name',
      'r.tenant_id as role_tenant_id',
      'r.actions',
    ])
    .where('b.revoked_at', 'is', null)
    .where('r.deleted_at', 'is', null)
    .where((eb) =>
      eb.or([
        eb('b.principal_id', '=', principalId),
        eb(
          'b.group_id',
          'in',
          eb.selectFrom('iam.group_members').select('group_id').where('principal_id', '=', principalId),
        ),
      ]),
    )
    .orderBy('b.id')
    .execute();
  const bindings: PolicyBinding[] = rows.map((binding) => ({
    id: binding.id,
    tenantId: binding.tenant_id,
    role: compiledRole(ctx, {
      id: binding.role_id,
      name: binding.role_name,
      tenant_id: binding.role_tenant_id,
      actions: binding.actions,
    }),
    via: binding.group_id ?? 'principal',
    scopeType: binding.scope_type,
    scopeId: binding.scope_id,
    scopeResourceType: binding.scope_resource_type,
  }));
  const actingFor =
    row.kind === 'agent' && row.acting_for !== null && depth === 0
      ? await loadSnapshot(ctx, row.acting_for, 1)
      : null;
  return {
    id: row.id,
    tenantId: row.tenant_id,
    kind: row.kind,
    disabled: row.disabled,
    bindings,
    actingFor,
  };
}

async function snapshotOf(ctx: IamContext, principalId: string): Promise<PrincipalSnapshot | null> {
  const cached = ctx.cache.snapshot(principalId);
  if (cached !== undefined) return cached;
  const generation = ctx.cache.generation;
  const snapshot = await loadSnapshot(ctx, principalId);
  if (snapshot) ctx.cache.setSnapshot(snapshot, generation);
  return snapshot;
}

export async function authorize(
  ctx: IamContext,
  identity: Identity,
  checks: AuthorizationCheck[],
): Promise<AuthorizationDecision[]> {
  if (identity.expiresAt !== null && Date.parse(identity.expiresAt) <= ctx.nowMs()) {
    return checks.map(() => ({ allowed: false, reason: 'the credential has expired' }));
  }
  const snapshot = await snapshotOf(ctx, identity.principalId);
  if (snapshot === null)
    return checks.map(() => ({ allowed: false, reason: `there is no principal ${identity.principalId}` }));
  // Tenant states come from the cache; only the ones it lacks are read, in one query.
  const missing = new Set<string>();
  const wanted = [snapshot.tenantId, ...checks.map((check) => check.resource.tenantId)];
  if (snapshot.actingFor) wanted.push(snapshot.actingFor.tenantId);
  for (const tenantId of wanted)
    if (ctx.cache.tenantState(tenantId) === undefined && isTenantId(tenantId)) missing.add(tenantId);
  const states = new Map<string, TenantState | null>();
  if (missing.size > 0) {
    const generation = ctx.cache.generation;
    const rows = await ctx.db
      .selectFrom('iam.tenants')
      .select(['id', 'state'])
      .where('id', 'in', [...missing])
      .execute();
    const found = new Map(rows.map((row) => [row.id, row.state]));
    for (const tenantId of missing) {
      states.set(tenantId, found.get(tenantId) ?? null);
      ctx.cache.setTenantState(tenantId, found.get(tenantId) ?? null, generation);
    }
  }
  const stateOf = (tenantId: string) => {
    const known = states.get(tenantId);
    if (known !== undefined) return known;
    return ctx.cache.tenantState(tenantId) ?? null;
  };
  return checks.map((check) => decide(snapshot, check, stateOf));
}

export function authorizeRoutes(iam: Iam): RouteBindings<'can'> {
  return {
    can: {
      async run(input, context) {
        const identity = requireIdentity(context);
        const checks = input.checks.map((check) => ({
          action: check.action,
          resource: { ...check.resource, tenantId: check.resource.tenantId ?? context.tenantId },
        }));
        return { data: { results: await iam.authorize(identity, checks) } };
      },
    },
  };
}
