/**
 * Delegations: what an agent may do for its person without asking, and what waits for the person's
 * confirmation (docs/confirmations.md). An agent has at most one active delegation; creating the
 * agent creates it (DEFAULT_CONFIRM unless the creator names patterns), `delegations.create`
 * replaces it, and `revoke` ends it. An agent whose delegation is revoked or expired does not
 * authenticate, as when its person is disabled: the change drops the agent's cached credentials,
 * and the change feed tells every process, whose live streams and tunnels then close.
 *
 * Who may: the person the agent acts for, or a holder of `iam:delegations:*` (tenant
 * administrators); never an agent, its own delegation included (docs/decisions/delegation-iam-agents.md).
 */
import { sql } from 'kysely';
import { ComputeError, DEFAULT_CONFIRM_PATTERNS, type Identity } from '@better-compute/core';
import type { Iam } from '../api.js';
import { change, type Db, type IamContext, notFound } from '../context.js';
import { isPatternShape } from '../policy.js';
import { principalIn, requireIdentity, type RouteBindings, type RouteContext } from '../routes.js';
import { type DelegationRow, pageOf, toDelegation } from '../rows.js';
import type { Delegation } from '../types.js';

/** The default confirm patterns (core's DEFAULT_CONFIRM, where compute reads them too). */
export const DEFAULT_CONFIRM: readonly string[] = DEFAULT_CONFIRM_PATTERNS;

/** The most patterns one delegation holds. */
const MAX_CONFIRM_PATTERNS = 100;

export interface DelegationInput {
  agentId: string;
  confirm?: readonly string[] | undefined;
  spendLimitGpuHours?: number | null | undefined;
  expiresAt?: string | Date | null | undefined;
  /** Who sets it: a principal id, or `system` for the service's own calls. */
  createdBy?: string | undefined;
}

function checkedConfirm(patterns: readonly string[] | undefined): string[] {
  if (patterns === undefined) return [...DEFAULT_CONFIRM];
  if (patterns.length > MAX_CONFIRM_PATTERNS) {
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `a delegation holds at most ${MAX_CONFIRM_PATTERNS} patterns`,
      {
        details: { field: 'confirm' },
      },
    );
  }
  for (const pattern of patterns) {
    if (typeof pattern !== 'string' || !isPatternShape(pattern) || pattern.endsWith('@own')) {
      throw new ComputeError(
        'INVALID_ARGUMENT',
        `confirm: ${JSON.stringify(String(pattern).slice(0, 200))} is not an action pattern`,
        {
          details: { field: 'confirm' },
          hint: 'Write action patterns such as compute:*:delete or compute:nodes:retire (no @own).',
        },
      );
    }
  }
  return [...new Set(patterns)];
}

function checkedLimit(limit: number | null | undefined): number | null {
  if (limit === undefined || limit === null) return null;
  if (!Number.isFinite(limit) || limit < 0 || limit > 10_000_000) {
    throw new ComputeError('INVALID_ARGUMENT', 'spendLimitGpuHours must be a number of GPU-hours from 0', {
      details: { field: 'spendLimitGpuHours' },
    });
  }
  return limit;
}

function checkedExpiry(ctx: IamContext, expiresAt: string | Date | null | undefined): Date | null {
  if (expiresAt === undefined || expiresAt === null) return null;
  const at = new Date(expiresAt);
  if (Number.isNaN(at.getTime()) || at <= ctx.clock()) {
    throw new ComputeError('INVALID_ARGUMENT', 'expiresAt must be a time in the future', {
      details: { field: 'expiresAt' },
    });
  }
  return at;
}

/**
 * Inside a transaction that holds the agent's row: ends the agent's active delegation and writes
 * the new one. Principal creation calls it in its own transaction, so no agent is ever without one.
 */
export async function writeDelegation(
  ctx: IamContext,
  trx: Db,
  agent: { id: string; tenantId: string; actingFor: string },
  input: Omit<DelegationInput, 'agentId'>,
): Promise<DelegationRow> {
  const confirm = checkedConfirm(input.confirm);
  const limit = checkedLimit(input.spendLimitGpuHours);
  const expiresAt = checkedExpiry(ctx, input.expiresAt);
  const now = ctx.clock();
  await trx
    .updateTable('iam.delegations')
    .set({ revoked_at: now })
    .where('agent_id', '=', agent.id)
    .where('revoked_at', 'is', null)
    .execute();
  return trx
    .insertInto('iam.delegations')
    .values({
      id: ctx.id('delegation'),
      tenant_id: agent.tenantId,
      agent_id: agent.id,
      person_id: agent.actingFor,
      confirm,
      spend_limit_gpu_hours: limit,
      created_by: input.createdBy ?? 'system',
      created_at: now,
      expires_at: expiresAt,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** The agent's delegation that is neither revoked nor expired, or undefined. */
export async function activeDelegation(
  ctx: IamContext,
  agentId: string,
  trx: Db = ctx.db,
): Promise<DelegationRow | undefined> {
  const now = ctx.clock();
  return trx
    .selectFrom('iam.delegations')
    .selectAll()
    .where('agent_id', '=', agentId)
    .where('revoked_at', 'is', null)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
    .executeTakeFirst();
}

async function requireDelegation(ctx: IamContext, id: string): Promise<DelegationRow> {
  const row = await ctx.db.selectFrom('iam.delegations').selectAll().where('id', '=', id).executeTakeFirst();
  if (!row) throw notFound(`delegation ${id}`);
  return row;
}

type DelegationMethods =
  'createDelegation' | 'getDelegation' | 'listDelegations' | 'revokeDelegation' | 'delegationState';

export function delegationService(ctx: IamContext): Pick<Iam, DelegationMethods> {
  return {
    async createDelegation(input) {
      return change(ctx, async (trx) => {
        const agent = await trx
          .selectFrom('iam.principals')
          .select(['id', 'tenant_id', 'kind', 'acting_for'])
          .where('id', '=', input.agentId)
          .forUpdate()
          .executeTakeFirst();
        if (!agent || agent.kind !== 'agent' || agent.acting_for === null)
          throw notFound(`agent ${input.agentId}`);
        const row = await writeDelegation(
          ctx,
          trx,
          { id: agent.id, tenantId: agent.tenant_id, actingFor: agent.acting_for },
          input,
        );
        // The agent's cached identity carries its delegation: drop it everywhere.
        return { result: toDelegation(row, ctx.clock()), changes: [{ type: 'principal', id: agent.id }] };
      });
    },
    async getDelegation(id) {
      return toDelegation(await requireDelegation(ctx, id), ctx.clock());
    },
    async listDelegations(input) {
      const limit = input.limit ?? 50;
      let query = ctx.db
        .selectFrom('iam.delegations')
        .selectAll()
        .where('tenant_id', '=', input.tenantId)
        .orderBy('id')
        .limit(limit + 1);
      if (input.agentId !== undefined) query = query.where('agent_id', '=', input.agentId);
      if (input.personId !== undefined) query = query.where('person_id', '=', input.personId);
      if (input.cursor !== undefined) query = query.where('id', '>', input.cursor);
      const now = ctx.clock();
      return pageOf(
        (await query.execute()).map((row) => toDelegation(row, now)),
        limit,
      );
    },
    async revokeDelegation(id) {
      return change(ctx, async (trx) => {
        const row = await trx
          .updateTable('iam.delegations')
          .set({ revoked_at: sql<Date>`coalesce(revoked_at, ${ctx.clock()})` })
          .where('id', '=', id)
          .returningAll()
          .executeTakeFirst();
        if (!row) throw notFound(`delegation ${id}`);
        return {
          result: toDelegation(row, ctx.clock()),
          changes: [{ type: 'principal', id: row.agent_id }],
        };
      });
    },
    async delegationState(id) {
      const row = await ctx.db
        .selectFrom('iam.delegations as d')
        .innerJoin('iam.principals as a', 'a.id', 'd.agent_id')
        .innerJoin('iam.principals as p', 'p.id', 'd.person_id')
        .selectAll('d')
        .select(['a.disabled as agent_disabled', 'p.disabled as person_disabled'])
        .where('d.id', '=', id)
        .executeTakeFirst();
      if (!row) return null;
      // A disabled (suspended) agent or person: the delegation counts for nothing meanwhile.
      if (row.agent_disabled || row.person_disabled) return 'revoked';
      return toDelegation(row, ctx.clock()).state;
    },
  };
}

/** An agent can never change a delegation, its own least of all. */
function refuseAgents(identity: Identity): void {
  if (identity.principalKind === 'agent') {
    throw new ComputeError('ACCESS_DENIED', 'an agent cannot create, change or revoke a delegation', {
      details: { reason: 'agent-cannot-delegate' },
      hint: 'The person the agent acts for (or a tenant administrator) sets its delegation (POST /api/iam/delegations/create).',
    });
  }
}

/** Whether the caller holds `action` on the tenant's delegations (tenant administrators). */
async function holds(iam: Iam, identity: Identity, action: string, tenantId: string): Promise<boolean> {
  const [decision] = await iam.authorize(identity, [
    { action, resource: { type: 'iam-delegation', tenantId } },
  ]);
  return decision?.allowed === true;
}

async function delegationIn(iam: Iam, id: string, tenantId: string): Promise<Delegation> {
  const found = await iam.getDelegation(id).catch(() => null);
  if (!found || found.tenantId !== tenantId)
    throw new ComputeError('NOT_FOUND', `delegation ${id} was not found in tenant ${tenantId}`);
  return found;
}

async function agentIn(iam: Iam, agentId: string, tenantId: string) {
  const agent = await principalIn(iam, agentId, tenantId);
  if (agent.kind !== 'agent' || agent.actingFor === null)
    throw new ComputeError('INVALID_ARGUMENT', `principal ${agentId} is not an agent`, {
      details: { field: 'agentId' },
    });
  return agent;
}

/** The resource a delegation's action is decided on: its person owns it. */
async function delegationResource(iam: Iam, id: string, context: RouteContext) {
  const found = await iam.getDelegation(id).catch(() => null);
  return {
    type: 'iam-delegation',
    id,
    tenantId: context.tenantId,
    ...(found && found.tenantId === context.tenantId ? { ownerId: found.personId } : {}),
  };
}

export function delegationRoutes(
  iam: Iam,
): RouteBindings<'delegations.create' | 'delegations.list' | 'delegations.get' | 'delegations.revoke'> {
  return {
    'delegations.create': {
      async resource(input, context) {
        const agent = await iam.getPrincipal(input.agentId).catch(() => null);
        return {
          type: 'iam-delegation',
          tenantId: context.tenantId,
          ...(agent?.actingFor && agent.tenantId === context.tenantId ? { ownerId: agent.actingFor } : {}),
        };
      },
      async selfServe(input, { identity, tenantId }) {
        refuseAgents(identity);
        const agent = await iam.getPrincipal(input.agentId).catch(() => null);
        return agent !== null && agent.tenantId === tenantId && agent.actingFor === identity.principalId;
      },
      async run(input, context) {
        const identity = requireIdentity(context);
        refuseAgents(identity);
        const agent = await agentIn(iam, input.agentId, context.tenantId);
        return {
          data: await iam.createDelegation({
            agentId: agent.id,
            confirm: input.confirm,
            spendLimitGpuHours: input.spendLimitGpuHours,
            expiresAt: input.expiresAt,
            createdBy: identity.principalId,
          }),
        };
      },
    },
    'delegations.list': {
      resource: (_input, { tenantId }) => ({ type: 'iam-delegation', tenantId }),
      // Anyone lists their own: a person their agents', an agent its own; the action lists all.
      selfServe: async () => true,
      async run(input, context) {
        const identity = requireIdentity(context);
        const filter: { agentId?: string; personId?: string } = {};
        if (!(await holds(iam, identity, 'iam:delegations:list', context.tenantId))) {
          if (identity.tenantId !== context.tenantId)
            throw new ComputeError(
              'ACCESS_DENIED',
              `iam:delegations:list is not allowed in ${context.tenantId}`,
              {
                details: { action: 'iam:delegations:list' },
              },
            );
          if (identity.principalKind === 'agent') filter.agentId = identity.principalId;
          else filter.personId = identity.principalId;
        }
        if (input.agentId !== undefined) {
          if (filter.agentId !== undefined && filter.agentId !== input.agentId)
            return { data: { items: [], nextCursor: null } };
          filter.agentId = input.agentId;
        }
        return {
          data: await iam.listDelegations({
            tenantId: context.tenantId,
            limit: input.limit,
            ...filter,
            ...(input.cursor ? { cursor: input.cursor } : {}),
          }),
        };
      },
    },
    'delegations.get': {
      resource: (input, context) => delegationResource(iam, input.delegationId, context),
      async selfServe(input, { identity, tenantId }) {
        const found = await iam.getDelegation(input.delegationId).catch(() => null);
        return (
          found !== null &&
          found.tenantId === tenantId &&
          (found.personId === identity.principalId || found.agentId === identity.principalId)
        );
      },
      async run(input, context) {
        return { data: await delegationIn(iam, input.delegationId, context.tenantId) };
      },
    },
    'delegations.revoke': {
      resource: (input, context) => delegationResource(iam, input.delegationId, context),
      async selfServe(input, { identity, tenantId }) {
        refuseAgents(identity);
        const found = await iam.getDelegation(input.delegationId).catch(() => null);
        return found !== null && found.tenantId === tenantId && found.personId === identity.principalId;
      },
      async run(input, context) {
        refuseAgents(requireIdentity(context));
        const found = await delegationIn(iam, input.delegationId, context.tenantId);
        return { data: await iam.revokeDelegation(found.id) };
      },
    },
  };
}
