/**
 * Principals: people (email and password), service accounts, and agents, which act for a person of
 * their own tenant and never hold more than that person (decided in `policy.ts`). Disabling one ends
 * what its credentials may do on the next call; the last platform administrator cannot be disabled.
 */
import { sql } from 'kysely';
import { ComputeError, type IdKind, type PrincipalKind, ROOT_TENANT } from '@better-compute/core';
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
import { principalIn, principalResource, type RouteBindings } from '../routes.js';
import { pageOf, PRINCIPAL_COLUMNS, type PrincipalRow, toPrincipal } from '../rows.js';
import { hashPassword } from '../secrets.js';
import type { Principal } from '../types.js';
import { type DelegationInput, writeDelegation } from './delegations.js';
import { assertPlatformKeepsAnAdmin, lockPlatformAdmins } from './platform-admins.js';
import { lockTenant, requireActiveTenant } from './tenants.js';

export async function principalRow(
  ctx: IamContext,
  principalId: string,
  trx: Db = ctx.db,
): Promise<PrincipalRow | undefined> {
  return trx
    .selectFrom('iam.principals')
    .select(PRINCIPAL_COLUMNS)
    .where('id', '=', principalId)
    .executeTakeFirst();
}

export async function requirePrincipal(
  ctx: IamContext,
  principalId: string,
  trx: Db = ctx.db,
): Promise<PrincipalRow> {
  const row = await principalRow(ctx, principalId, trx);
  if (!row) throw notFound(`principal ${principalId}`);
  return row;
}

export function normalEmail(email: string): string {
  return email.trim().toLowerCase();
}

const KIND_IDS: Record<PrincipalKind, IdKind> = {
  person: 'person',
  'service-account': 'serviceAccount',
  agent: 'agent',
};

async function insertPrincipal(
  ctx: IamContext,
  values: {
    tenantId: string;
    kind: PrincipalKind;
    email: string | null;
    displayName: string;
    passwordHash: string | null;
    actingFor: string | null;
  },
  delegation?: Omit<DelegationInput, 'agentId'>,
): Promise<Principal> {
  try {
    return await ctx.db.transaction().execute(async (trx) => {
      await requireActiveTenant(ctx, values.tenantId, trx);
      await lockTenant(values.tenantId, trx);
      await underLimit(ctx, 'principalsPerTenant', `tenant ${values.tenantId}'s principals`, () =>
        countOf(
          trx
            .selectFrom('iam.principals')
            .select((eb) => eb.fn.countAll().as('n'))
            .where('tenant_id', '=', values.tenantId),
        ),
      );
      if (values.actingFor !== null) {
        const person = await principalRow(ctx, values.actingFor, trx);
        if (!person || person.kind !== 'person' || person.tenant_id !== values.tenantId) {
          throw new ComputeError('INVALID_ARGUMENT', 'an agent acts for a person of its own tenant', {
            details: { field: 'actingFor' },
          });
        }
      }
      const row = await trx
        .insertInto('iam.principals')
        .values({
          id: ctx.id(KIND_IDS[values.kind]),
          tenant_id: values.tenantId,
          kind: values.kind,
          email: values.email,
          display_name: values.displayName,
          password_hash: values.passwordHash,
          acting_for: values.actingFor,
          created_at: ctx.clock(),
        })
        .returning(PRINCIPAL_COLUMNS)
        .executeTakeFirstOrThrow();
      // An agent is never without a delegation: it is written with the agent.
      if (row.kind === 'agent' && row.acting_for !== null)
        await writeDelegation(
          ctx,
          trx,
          { id: row.id, tenantId: row.tenant_id, actingFor: row.acting_for },
          delegation ?? {},
        );
      return toPrincipal(row);
    });
  } catch (error) {
    if (isUniqueViolation(error)) {
      throw new ComputeError(
        'ALREADY_EXISTS',
        `a person with that email already exists in tenant ${values.tenantId}`,
      );
    }
    throw error;
  }
}

export async function createPerson(
  ctx: IamContext,
  input: { tenantId: string; email: string; password?: string; displayName?: string },
): Promise<Principal> {
  const email = normalEmail(input.email);
  if (!/^[^\s@]+@[^\s@]+$/.test(email) || email.length > 254) {
    throw new ComputeError('INVALID_ARGUMENT', 'email must be an email address', {
      details: { field: 'email' },
    });
  }
  if (input.password !== undefined && input.password.length < 8) {
    throw new ComputeError('INVALID_ARGUMENT', 'the password must be at least 8 characters', {
      details: { field: 'password' },
    });
  }
  return insertPrincipal(ctx, {
    tenantId: input.tenantId,
    kind: 'person',
    email,
    displayName: input.displayName ?? email,
    passwordHash: input.password === undefined ? null : await hashPassword(input.password),
    actingFor: null,
  });
}

async function setDisabled(ctx: IamContext, principalId: string, disabled: boolean): Promise<Principal> {
  return change(ctx, async (trx) => {
    if (disabled) await lockPlatformAdmins(trx);
    const row = await trx
      .updateTable('iam.principals')
      .set({ disabled, version: sql<number>`version + 1` })
      .where('id', '=', principalId)
      .returning(PRINCIPAL_COLUMNS)
      .executeTakeFirst();
    if (!row) throw notFound(`principal ${principalId}`);
    if (disabled && row.tenant_id === ROOT_TENANT)
      await assertPlatformKeepsAnAdmin(trx, `disabling principal ${principalId}`);
    return { result: toPrincipal(row), changes: [{ type: 'principal', id: principalId }] };
  });
}

type PrincipalMethods =
  | 'createPerson'
  | 'createServiceAccount'
  | 'createAgent'
  | 'getPrincipal'
  | 'listPrincipals'
  | 'disablePrincipal'
  | 'enablePrincipal';

export function principalService(ctx: IamContext): Pick<Iam, PrincipalMethods> {
  return {
    createPerson: (input) => createPerson(ctx, input),
    createServiceAccount: (input) =>
      insertPrincipal(ctx, {
        tenantId: input.tenantId,
        kind: 'service-account',
        email: null,
        displayName: input.displayName,
        passwordHash: null,
        actingFor: null,
      }),
    createAgent: (input) =>
      insertPrincipal(
        ctx,
        {
          tenantId: input.tenantId,
          kind: 'agent',
          email: null,
          displayName: input.displayName,
          passwordHash: null,
          actingFor: input.actingFor,
        },
        {
          confirm: input.confirm,
          spendLimitGpuHours: input.spendLimitGpuHours,
          createdBy: input.createdBy,
        },
      ),
    async getPrincipal(principalId) {
      return toPrincipal(await requirePrincipal(ctx, principalId));
    },
    async listPrincipals(input) {
      const limit = input.limit ?? 50;
      let query = ctx.db
        .selectFrom('iam.principals')
        .select(PRINCIPAL_COLUMNS)
        .where('tenant_id', '=', input.tenantId)
        .orderBy('id')
        .limit(limit + 1);
      if (input.kind !== undefined) query = query.where('kind', '=', input.kind);
      if (input.cursor !== undefined) query = query.where('id', '>', input.cursor);
      return pageOf((await query.execute()).map(toPrincipal), limit);
    },
    disablePrincipal: (principalId) => setDisabled(ctx, principalId, true),
    enablePrincipal: (principalId) => setDisabled(ctx, principalId, false),
  };
}

export function principalRoutes(
  iam: Iam,
): RouteBindings<
  'principals.create' | 'principals.get' | 'principals.list' | 'principals.disable' | 'principals.enable'
> {
  return {
    'principals.create': {
      resource: (_input, { tenantId }) => ({ type: 'iam-principal', tenantId }),
      async run(input, { tenantId, identity }) {
        if (input.kind !== 'agent' && (input.confirm !== undefined || input.spendLimitGpuHours !== undefined))
          throw new ComputeError(
            'INVALID_ARGUMENT',
            'only an agent has a delegation (confirm, spendLimitGpuHours)',
            {
              details: { field: input.confirm !== undefined ? 'confirm' : 'spendLimitGpuHours' },
            },
          );
        if (input.kind === 'person') {
          if (!input.email)
            throw new ComputeError('INVALID_ARGUMENT', 'a person needs an email', {
              details: { field: 'email' },
            });
          return {
            data: await iam.createPerson({
              tenantId,
              email: input.email,
              ...(input.password !== undefined ? { password: input.password } : {}),
              ...(input.displayName !== undefined ? { displayName: input.displayName } : {}),
            }),
          };
        }
        if (!input.displayName)
          throw new ComputeError('INVALID_ARGUMENT', `a ${input.kind} needs a displayName`, {
            details: { field: 'displayName' },
          });
        if (input.kind === 'service-account')
          return { data: await iam.createServiceAccount({ tenantId, displayName: input.displayName }) };
        if (!input.actingFor)
          throw new ComputeError('INVALID_ARGUMENT', 'an agent needs actingFor, the person it acts for', {
            details: { field: 'actingFor' },
          });
        return {
          data: await iam.createAgent({
            tenantId,
            displayName: input.displayName,
            actingFor: input.actingFor,
            confirm: input.confirm,
            spendLimitGpuHours: input.spendLimitGpuHours,
            ...(identity ? { createdBy: identity.principalId } : {}),
          }),
        };
      },
    },
    'principals.get': {
      resource: (input, { tenantId }) => principalResource(input.principalId, tenantId),
      async run(input, { tenantId }) {
        return { data: await principalIn(iam, input.principalId, tenantId) };
      },
    },
    'principals.list': {
      resource: (_input, { tenantId }) => ({ type: 'iam-principal', tenantId }),
      async run(input, { tenantId }) {
        return {
          data: await iam.listPrincipals({
            tenantId,
            limit: input.limit,
            ...(input.kind ? { kind: input.kind } : {}),
            ...(input.cursor ? { cursor: input.cursor } : {}),
          }),
        };
      },
    },
    'principals.disable': {
      resource: (input, { tenantId }) => ({ type: 'iam-principal', id: input.principalId, tenantId }),
      async run(input, { tenantId }) {
        await principalIn(iam, input.principalId, tenantId);
        return { data: await iam.disablePrincipal(input.principalId) };
      },
    },
    'principals.enable': {
      resource: (input, { tenantId }) => ({ type: 'iam-principal', id: input.principalId, tenantId }),
      async run(input, { tenantId }) {
        await principalIn(iam, input.principalId, tenantId);
        return { data: await iam.enablePrincipal(input.principalId) };
      },
    },
  };
}
