/**
 * Actions and roles: the action catalog compute installs (`installActions`), the checks every role's
 * patterns pass (a pattern's shape, and that it matches a known action), and a tenant's custom roles.
 * Built-in roles (tenant_id null) are read here and never changed.
 */
import { type ActionCatalogEntry, ComputeError, isId } from '@better-compute/core';
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
import { IAM_ACTIONS } from '../methods.js';
import { BUILT_IN_ROLE_IDS } from '../migrations.js';
import { compilePattern, isPatternShape, patternMatches } from '../policy.js';
import type { RouteBindings } from '../routes.js';
import { ROLE_COLUMNS, type RoleRow, toRole } from '../rows.js';
import { requireActiveTenant } from './tenants.js';

/** Every action a role may name: compute's installed catalog and IAM's own. */
export async function knownActions(ctx: IamContext, trx: Db = ctx.db): Promise<string[]> {
  const rows = await trx.selectFrom('iam.action_catalog').select('action').execute();
  return [...new Set([...rows.map((row) => row.action), ...IAM_ACTIONS])];
}

export function checkPatterns(actions: string[], known: string[]): void {
  for (const action of actions) {
    if (!isPatternShape(action)) {
      throw new ComputeError('INVALID_ARGUMENT', `${JSON.stringify(action)} is not an action pattern`, {
        details: { field: 'actions', action },
        hint: 'Patterns look like compute:reservations:create, compute:reservations:*, compute:*:read or compute:sandboxes:*@own.',
      });
    }
    const pattern = compilePattern(action);
    if (!known.some((name) => patternMatches(pattern, name))) {
      throw new ComputeError('INVALID_ARGUMENT', `${action} matches no known action`, {
        details: { field: 'actions', action },
        hint: 'List the known actions with `better-compute api --list`.',
      });
    }
  }
}

export async function installActions(ctx: IamContext, catalog: ActionCatalogEntry[]): Promise<void> {
  for (const entry of catalog) {
    if (!/^[a-z0-9-]+(:[a-z0-9-]+)+$/.test(entry.action)) {
      throw new ComputeError('INVALID_ARGUMENT', `${JSON.stringify(entry.action)} is not an action name`);
    }
  }
  const unique = [...new Map(catalog.map((entry) => [entry.action, entry])).values()];
  await ctx.db.transaction().execute(async (trx) => {
    if (unique.length === 0) {
      await trx.deleteFrom('iam.action_catalog').where('source', '=', 'compute').execute();
      return;
    }
    await trx
      .deleteFrom('iam.action_catalog')
      .where('source', '=', 'compute')
      .where(
        'action',
        'not in',
        unique.map((entry) => entry.action),
      )
      .execute();
    await trx
      .insertInto('iam.action_catalog')
      .values(unique.map((entry) => ({ action: entry.action, summary: entry.summary, source: 'compute' })))
      .onConflict((oc) =>
        oc.column('action').doUpdateSet((eb) => ({ summary: eb.ref('excluded.summary'), source: 'compute' })),
      )
      .execute();
  });
}

/** A role by id or name, built in or the tenant's own. */
export async function findRole(
  ctx: IamContext,
  tenantId: string,
  role: string,
  trx: Db = ctx.db,
): Promise<RoleRow> {
  const row = await trx
    .selectFrom('iam.roles')
    .select(ROLE_COLUMNS)
    .where(isId('role', role) ? 'id' : 'name', '=', role)
    .where('deleted_at', 'is', null)
    .where((eb) => eb.or([eb('tenant_id', 'is', null), eb('tenant_id', '=', tenantId)]))
    .executeTakeFirst();
  if (!row) throw notFound(`role ${role} in tenant ${tenantId}`);
  return row;
}

export function roleService(
  ctx: IamContext,
): Pick<Iam, 'installActions' | 'createRole' | 'listRoles' | 'deleteRole'> {
  return {
    installActions: (catalog) => installActions(ctx, catalog),
    async createRole(input) {
      await requireActiveTenant(ctx, input.tenantId);
      if (!/^[a-z][a-z0-9-]{0,62}$/.test(input.name)) {
        throw new ComputeError('INVALID_ARGUMENT', 'name must be lowercase letters, digits and dashes', {
          details: { field: 'name' },
        });
      }
      if (Object.hasOwn(BUILT_IN_ROLE_IDS, input.name)) {
        throw new ComputeError('ALREADY_EXISTS', `${input.name} is a built-in role`);
      }
      const actions = [...new Set(input.actions)];
      if (actions.length === 0 || actions.length > 100) {
        throw new ComputeError('INVALID_ARGUMENT', 'a role has 1 to 100 action patterns', {
          details: { field: 'actions' },
        });
      }
      checkPatterns(actions, await knownActions(ctx));
      await underLimit(ctx, 'rolesPerTenant', `tenant ${input.tenantId}'s roles`, () =>
        countOf(
          ctx.db
            .selectFrom('iam.roles')
            .select((eb) => eb.fn.countAll().as('n'))
            .where('tenant_id', '=', input.tenantId),
        ),
      );
      try {
        const row = await ctx.db
          .insertInto('iam.roles')
          .values({
            id: ctx.id('role'),
            tenant_id: input.tenantId,
            name: input.name,
            description: input.description ?? '',
            actions,
            created_at: ctx.clock(),
          })
          .returning(ROLE_COLUMNS)
          .executeTakeFirstOrThrow();
        return toRole(row);
      } catch (error) {
        if (isUniqueViolation(error))
          throw new ComputeError(
            'ALREADY_EXISTS',
            `role ${input.name} already exists in tenant ${input.tenantId}`,
          );
        throw error;
      }
    },
    async listRoles(tenantId) {
      const rows = await ctx.db
        .selectFrom('iam.roles')
        .select(ROLE_COLUMNS)
        .where('deleted_at', 'is', null)
        .where((eb) => eb.or([eb('tenant_id', 'is', null), eb('tenant_id', '=', tenantId)]))
        .orderBy('id')
        .execute();
      return { items: rows.map(toRole), nextCursor: null };
    },
    async deleteRole(tenantId, roleId) {
      return change(ctx, async (trx) => {
        const row = await trx
          .selectFrom('iam.roles')
          .select(ROLE_COLUMNS)
          .where('id', '=', roleId)
          .where('deleted_at', 'is', null)
          .executeTakeFirst();
        if (!row || (row.tenant_id !== null && row.tenant_id !== tenantId))
          throw notFound(`role ${roleId} in tenant ${tenantId}`);
        if (row.tenant_id === null)
          throw new ComputeError('INVALID_STATE', `${row.name} is a built-in role and cannot be deleted`);
        const used = await trx
          .selectFrom('iam.bindings')
          .select('id')
          .where('role_id', '=', roleId)
          .where('revoked_at', 'is', null)
          .executeTakeFirst();
        if (used)
          throw new ComputeError('INVALID_STATE', `role ${row.name} is used by binding ${used.id}`, {
            hint: `Revoke binding ${used.id} first.`,
          });
        await trx
          .updateTable('iam.roles')
          .set({ deleted_at: ctx.clock() })
          .where('id', '=', roleId)
          .execute();
        return { result: toRole(row), changes: [{ type: 'policy' }] };
      });
    },
  };
}

export function roleRoutes(iam: Iam): RouteBindings<'roles.create' | 'roles.list' | 'roles.delete'> {
  return {
    'roles.create': {
      resource: (_input, { tenantId }) => ({ type: 'iam-role', tenantId }),
      async run(input, { tenantId }) {
        return {
          data: await iam.createRole({
            tenantId,
            name: input.name,
            actions: input.actions,
            ...(input.description !== undefined ? { description: input.description } : {}),
          }),
        };
      },
    },
    'roles.list': {
      resource: (_input, { tenantId }) => ({ type: 'iam-role', tenantId }),
      async run(_input, { tenantId }) {
        return { data: await iam.listRoles(tenantId) };
      },
    },
    'roles.delete': {
      resource: (input, { tenantId }) => ({ type: 'iam-role', id: input.roleId, tenantId }),
      async run(input, { tenantId }) {
        return { data: await iam.deleteRole(tenantId, input.roleId) };
      },
    },
  };
}
