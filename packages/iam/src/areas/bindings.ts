/**
 * Groups and bindings: who holds which role, on a tenant, a project or one resource. A binding
 * created through the API grants nothing its creator does not hold at its scope
 * (docs/decisions/iam-no-escalation.md); platform-admin binds only in the root tenant, and the last
 * platform administrator's binding cannot be revoked.
 */
import { sql } from 'kysely';
import { type AuthorizationCheck, ComputeError, type Identity, ROOT_TENANT } from '@better-compute/core';
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
import { BUILT_IN_ROLE_IDS } from '../migrations.js';
import { compilePattern, patternMatches, RESERVED_ACTIONS } from '../policy.js';
import { requireIdentity, type RouteBindings } from '../routes.js';
import { type BindingRow, iso, pageOf, toBinding } from '../rows.js';
import type { Binding, BindingScope } from '../types.js';
import { authorize } from './authorize.js';
import { assertPlatformKeepsAnAdmin, lockPlatformAdmins } from './platform-admins.js';
import { principalRow } from './principals.js';
import { checkPatterns, findRole, knownActions } from './roles.js';
import { lockTenant, requireActiveTenant } from './tenants.js';

/**
 * Refuses a binding that would give more than its creator holds: every known action the role names
 * must be allowed to the creator on the binding's scope (for an `@own` pattern, on a resource of the
 * creator's own). compute:fleet:admin counts only where a binding can carry it, a root-tenant
 * binding at tenant scope.
 */
async function checkGrant(
  ctx: IamContext,
  granter: Identity,
  role: { name: string; actions: string[] },
  tenantId: string,
  scope: BindingScope,
  known: readonly string[],
): Promise<void> {
  const onScope: AuthorizationCheck['resource'] =
    scope.type === 'tenant'
      ? { type: 'tenant', id: tenantId, tenantId }
      : scope.type === 'project'
        ? { type: 'project', id: scope.id, tenantId, projectId: scope.id }
        : { type: scope.resourceType, id: scope.id, tenantId };
  const platform = tenantId === ROOT_TENANT && scope.type === 'tenant';
  const checks = new Map<string, AuthorizationCheck>();
  for (const source of role.actions) {
    const pattern = compilePattern(source);
    for (const action of known) {
      if (!patternMatches(pattern, action)) continue;
      if (RESERVED_ACTIONS.has(action) && !platform) continue;
      const resource = pattern.own ? { ...onScope, ownerId: granter.principalId } : onScope;
      checks.set(`${action}${pattern.own ? '@own' : ''}`, { action, resource });
    }
  }
  const wanted = [...checks.values()];
  const decisions = await authorize(ctx, granter, wanted);
  const missing = wanted.filter((_, index) => !decisions[index]?.allowed).map((check) => check.action);
  if (missing.length === 0) return;
  const where = scope.type === 'tenant' ? `tenant ${tenantId}` : `${scope.type} ${scope.id}`;
  throw new ComputeError(
    'ACCESS_DENIED',
    `role ${role.name} grants ${missing.length === 1 ? 'an action' : `${missing.length} actions`} you do not hold on ${where}: ${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ', …' : ''}`,
    {
      details: { reason: 'escalation', role: role.name, missing },
      hint: 'Bind a role that grants only what you hold there, or ask someone who holds it to bind it.',
    },
  );
}

/** Bindings with their role's name, as the answers show them. */
function bindingsWithRole(trx: Db) {
  return trx
    .selectFrom('iam.bindings as b')
    .innerJoin('iam.roles as r', 'r.id', 'b.role_id')
    .select([
      'b.id',
      'b.tenant_id',
      'b.role_id',
      'r.name as role_name',
      'b.principal_id',
      'b.group_id',
      'b.scope_type',
      'b.scope_id',
      'b.scope_resource_type',
      'b.created_at',
      'b.revoked_at',
    ]);
}

async function bindingRow(trx: Db, bindingId: string): Promise<BindingRow | undefined> {
  return bindingsWithRole(trx).where('b.id', '=', bindingId).executeTakeFirst();
}

export async function createBinding(
  ctx: IamContext,
  input: Parameters<Iam['createBinding']>[0],
): Promise<Binding> {
  const scope = input.scope ?? { type: 'tenant' };
  if ((input.principalId === undefined) === (input.groupId === undefined)) {
    throw new ComputeError('INVALID_ARGUMENT', 'a binding names exactly one of principalId and groupId');
  }
  return change(ctx, async (trx) => {
    await requireActiveTenant(ctx, input.tenantId, trx);
    const role = await findRole(ctx, input.tenantId, input.role, trx);
    if (role.id === BUILT_IN_ROLE_IDS['platform-admin'] && input.tenantId !== ROOT_TENANT) {
      throw new ComputeError('INVALID_ARGUMENT', 'platform-admin can only be bound in the root tenant');
    }
    // Built-in roles may name actions of modules this deployment does not run; custom ones may not.
    const known = await knownActions(ctx, trx);
    if (role.tenant_id !== null) checkPatterns(role.actions, known);
    if (input.grantedBy) await checkGrant(ctx, input.grantedBy, role, input.tenantId, scope, known);
    if (input.principalId !== undefined) {
      const principal = await principalRow(ctx, input.principalId, trx);
      if (!principal || (principal.tenant_id !== input.tenantId && principal.tenant_id !== ROOT_TENANT)) {
        throw notFound(`principal ${input.principalId} in tenant ${input.tenantId}`);
      }
    } else {
      const group = await trx
        .selectFrom('iam.groups')
        .select('tenant_id')
        .where('id', '=', input.groupId!)
        .executeTakeFirst();
      if (!group || group.tenant_id !== input.tenantId)
        throw notFound(`group ${input.groupId} in tenant ${input.tenantId}`);
    }
    await lockTenant(input.tenantId, trx);
    await underLimit(ctx, 'bindingsPerTenant', `tenant ${input.tenantId}'s bindings`, () =>
      countOf(
        trx
          .selectFrom('iam.bindings')
          .select((eb) => eb.fn.countAll().as('n'))
          .where('tenant_id', '=', input.tenantId)
          .where('revoked_at', 'is', null),
      ),
    );
    const bindingId = ctx.id('binding');
    await trx
      .insertInto('iam.bindings')
      .values({
        id: bindingId,
        tenant_id: input.tenantId,
        role_id: role.id,
        principal_id: input.principalId ?? null,
        group_id: input.groupId ?? null,
        scope_type: scope.type,
        scope_id: scope.type === 'tenant' ? null : scope.id,
        scope_resource_type: scope.type === 'resource' ? scope.resourceType : null,
        created_at: ctx.clock(),
      })
      .execute();
    const row = await bindingRow(trx, bindingId);
    return { result: toBinding(row!), changes: [{ type: 'policy' }] };
  });
}

type BindingMethods =
  | 'createGroup'
  | 'addGroupMember'
  | 'removeGroupMember'
  | 'createBinding'
  | 'getBinding'
  | 'listBindings'
  | 'revokeBinding';

export function bindingService(ctx: IamContext): Pick<Iam, BindingMethods> {
  return {
    async createGroup(input) {
      await requireActiveTenant(ctx, input.tenantId);
      try {
        const row = await ctx.db
          .insertInto('iam.groups')
          .values({
            id: ctx.id('group'),
            tenant_id: input.tenantId,
            name: input.name,
            created_at: ctx.clock(),
          })
          .returningAll()
          .executeTakeFirstOrThrow();
        return { id: row.id, tenantId: row.tenant_id, name: row.name, createdAt: iso(row.created_at) };
      } catch (error) {
        if (isUniqueViolation(error))
          throw new ComputeError('ALREADY_EXISTS', `group ${input.name} already exists`);
        throw error;
      }
    },
    async addGroupMember(groupId, principalId) {
      await change(ctx, async (trx) => {
        const group = await trx
          .selectFrom('iam.groups')
          .select('tenant_id')
          .where('id', '=', groupId)
          .executeTakeFirst();
        const principal = await principalRow(ctx, principalId, trx);
        if (!group) throw notFound(`group ${groupId}`);
        if (!principal || principal.tenant_id !== group.tenant_id)
          throw notFound(`principal ${principalId} in tenant ${group.tenant_id}`);
        await trx
          .insertInto('iam.group_members')
          .values({ group_id: groupId, principal_id: principalId })
          .onConflict((oc) => oc.doNothing())
          .execute();
        return { result: undefined, changes: [{ type: 'policy' }] };
      });
    },
    async removeGroupMember(groupId, principalId) {
      await change(ctx, async (trx) => {
        await trx
          .deleteFrom('iam.group_members')
          .where('group_id', '=', groupId)
          .where('principal_id', '=', principalId)
          .execute();
        return { result: undefined, changes: [{ type: 'policy' }] };
      });
    },
    createBinding: (input) => createBinding(ctx, input),
    async getBinding(bindingId) {
      const row = await bindingRow(ctx.db, bindingId);
      if (!row) throw notFound(`binding ${bindingId}`);
      return toBinding(row);
    },
    async listBindings(input) {
      const limit = input.limit ?? 50;
      let query = bindingsWithRole(ctx.db)
        .where('b.tenant_id', '=', input.tenantId)
        .where('b.revoked_at', 'is', null)
        .orderBy('b.id')
        .limit(limit + 1);
      if (input.principalId !== undefined) query = query.where('b.principal_id', '=', input.principalId);
      if (input.cursor !== undefined) query = query.where('b.id', '>', input.cursor);
      return pageOf((await query.execute()).map(toBinding), limit);
    },
    async revokeBinding(bindingId) {
      return change(ctx, async (trx) => {
        await lockPlatformAdmins(trx);
        await trx
          .updateTable('iam.bindings')
          .set({ revoked_at: sql<Date>`coalesce(revoked_at, ${ctx.clock()})` })
          .where('id', '=', bindingId)
          .execute();
        const row = await bindingRow(trx, bindingId);
        if (!row) throw notFound(`binding ${bindingId}`);
        if (row.tenant_id === ROOT_TENANT && row.role_id === BUILT_IN_ROLE_IDS['platform-admin'])
          await assertPlatformKeepsAnAdmin(trx, `revoking binding ${bindingId}`);
        return { result: toBinding(row), changes: [{ type: 'policy' }] };
      });
    },
  };
}

export function bindingRoutes(
  iam: Iam,
): RouteBindings<'bindings.create' | 'bindings.list' | 'bindings.revoke'> {
  return {
    'bindings.create': {
      resource: (_input, { tenantId }) => ({ type: 'iam-binding', tenantId }),
      async run(input, context) {
        const { tenantId } = context;
        return {
          data: await iam.createBinding({
            tenantId,
            role: input.role,
            grantedBy: requireIdentity(context),
            ...(input.principalId ? { principalId: input.principalId } : {}),
            ...(input.groupId ? { groupId: input.groupId } : {}),
            ...(input.scope ? { scope: input.scope } : {}),
          }),
        };
      },
    },
    'bindings.list': {
      resource: (_input, { tenantId }) => ({ type: 'iam-binding', tenantId }),
      async run(input, { tenantId }) {
        return {
          data: await iam.listBindings({
            tenantId,
            limit: input.limit,
            ...(input.principalId ? { principalId: input.principalId } : {}),
            ...(input.cursor ? { cursor: input.cursor } : {}),
          }),
        };
      },
    },
    'bindings.revoke': {
      resource: (input, { tenantId }) => ({ type: 'iam-binding', id: input.bindingId, tenantId }),
      async run(input, { tenantId }) {
        const binding = await iam.getBinding(input.bindingId).catch(() => null);
        if (!binding || binding.tenantId !== tenantId)
          throw new ComputeError(
            'NOT_FOUND',
            `binding ${input.bindingId} was not found in tenant ${tenantId}`,
          );
        return { data: await iam.revokeBinding(input.bindingId) };
      },
    },
  };
}
