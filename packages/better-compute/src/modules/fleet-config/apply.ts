/**
 * `fleet.export`, `fleet.plan` and `fleet.apply` (docs/fleet.md). Export and plan read; apply is
 * decided in full before it runs (its binding's checks compute the plan and hand IAM every call it
 * would make, beside compute:fleet:admin), then recomputes the plan in its own transaction, refuses
 * with CONFIG_DRIFT when the planHash moved, and runs every call there: a denial or a refusal
 * anywhere applies nothing. The fleet as the apply left it is kept for the fleet.drift job.
 */
import { type AuthorizationCheck, ComputeError, type Identity, newId } from '@better-compute/core';
import { FLEET_ADMIN_ACTION, type FleetConfig, type FleetPlan } from '@better-compute/core/methods';
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { CallContext, ChecksContext } from '../define-module.js';
import { callChecks, runCalls } from './calls.js';
import { exportDocument, readLiveFleet } from './live.js';
import { documentTenantProblem, namedTenants, planFleet } from './plan.js';
import { fleetConfigDb } from './tables.js';

interface PlanInput {
  document: FleetConfig;
  prune: boolean;
}

/** A person applies: an agent plans, and hands the plan to its person (docs/decisions/fleet-config.md). */
function refuseAgent(identity: Identity | null): void {
  if (identity?.principalKind !== 'agent') return;
  throw new ComputeError('ACCESS_DENIED', 'an agent does not apply a fleet plan: a person applies', {
    details: { reason: 'agent', action: FLEET_ADMIN_ACTION },
    hint: 'Hand the plan and its planHash to your person, who reviews it and runs better-compute fleet apply FILE --plan-hash H.',
  });
}

function checkDocumentTenant(document: FleetConfig, tenantId: string): void {
  const problem = documentTenantProblem(document, tenantId);
  if (problem)
    throw new ComputeError('INVALID_ARGUMENT', problem, {
      details: { field: 'document.tenantId' },
      hint: `Export the fleet again (better-compute fleet export --out FILE): its tenantId is ${tenantId}.`,
    });
}

/** The tenants the document names that IAM knows, asked one by one (a document names few). */
async function knownTenants(document: FleetConfig, exists: (tenantId: string) => Promise<boolean>) {
  const known = new Set<string>();
  for (const tenant of namedTenants(document)) if (await exists(tenant)) known.add(tenant);
  return known;
}

async function planOf(
  db: Kysely<ComputeTables>,
  tenantId: string,
  input: PlanInput,
  known: ReadonlySet<string>,
): Promise<FleetPlan> {
  return planFleet(input.document, await readLiveFleet(db, tenantId), {
    prune: input.prune,
    knownTenants: known,
  });
}

/** PLAN_BLOCKED for a plan with a blocked change; CONFIG_DRIFT when it is not the plan reviewed. */
function assertApplicable(plan: FleetPlan, reviewed: string): void {
  const blocked = plan.changes.filter((change) => change.blocked !== null);
  if (blocked.length > 0) {
    const first = blocked[0]!;
    throw new ComputeError(
      'PLAN_BLOCKED',
      `${blocked.length} change(s) of the plan cannot be made; the first: ${first.kind} ${first.key}: ${first.blocked}`,
      {
        details: { blocked: blocked.map((c) => ({ kind: c.kind, key: c.key, reason: c.blocked })) },
        hint: 'Run better-compute fleet plan FILE for every BLOCKED line, change the document, and plan again.',
      },
    );
  }
  if (plan.planHash !== reviewed)
    throw new ComputeError(
      'CONFIG_DRIFT',
      `the fleet changed since the plan: its planHash is now ${plan.planHash}, not the ${reviewed} reviewed`,
      {
        details: { planHash: plan.planHash, reviewed },
        hint: 'Nothing was applied. Run better-compute fleet plan FILE again, review it, and apply with its new --plan-hash.',
      },
    );
}

export async function exportFleet(ctx: CallContext<unknown>): Promise<FleetConfig> {
  return exportDocument(await readLiveFleet(ctx.db, ctx.tenantId));
}

export async function planFleetMethod(ctx: CallContext<PlanInput>): Promise<FleetPlan> {
  checkDocumentTenant(ctx.input.document, ctx.tenantId);
  const known = await knownTenants(ctx.input.document, ctx.tenantExists);
  return planOf(ctx.db, ctx.tenantId, ctx.input, known);
}

type ApplyInput = PlanInput & { planHash: string };

// The tenants checks found IAM knows, for the transaction, which may not ask IAM (on PGlite an
// embedded IAM shares its one connection): keyed by the call's own input object.
const knownByCall = new WeakMap<object, ReadonlySet<string>>();

/**
 * The decisions `fleet.apply` needs before it runs: every call of the plan, on its own method's
 * action and resource. Read before the transaction, as the pipeline reads any binding's checks; a
 * caller IAM will refuse compute:fleet:admin is refused before the fleet is read.
 */
export async function applyChecks(
  db: Kysely<ComputeTables>,
  tenantId: string,
  raw: unknown,
  context: ChecksContext,
): Promise<AuthorizationCheck[]> {
  refuseAgent(context.identity);
  const [admin] = await context.authorize([
    { action: FLEET_ADMIN_ACTION, resource: { type: 'compute-fleet', id: tenantId, tenantId } },
  ]);
  if (!admin?.allowed) return [];
  const input = raw as ApplyInput;
  checkDocumentTenant(input.document, tenantId);
  const known = await knownTenants(input.document, context.tenantExists);
  knownByCall.set(input, known);
  const plan = await planOf(db, tenantId, input, known);
  assertApplicable(plan, input.planHash);
  return callChecks(db, tenantId, plan.calls);
}

export async function applyFleet(ctx: CallContext<ApplyInput>) {
  refuseAgent(ctx.identity);
  const known = knownByCall.get(ctx.input);
  if (!known) throw new ComputeError('INTERNAL', 'fleet.apply ran without its checks');
  // One apply (or drift check) of a tenant at a time, so nothing of ours moves between the plan and its calls.
  await lockFleet(ctx.db, ctx.tenantId);
  const plan = await planOf(ctx.db, ctx.tenantId, ctx.input, known);
  assertApplicable(plan, ctx.input.planHash);
  const calls = await runCalls(ctx, plan.calls);
  const after = exportDocument(await readLiveFleet(ctx.db, ctx.tenantId));
  const now = ctx.now();
  const id = newId('fleetApply');
  const counts = { create: plan.counts.create, update: plan.counts.update, delete: plan.counts.delete };
  const db = fleetConfigDb(ctx.db);
  await db
    .insertInto('compute.fleet_applies')
    .values({
      id,
      tenant_id: ctx.tenantId,
      plan_hash: plan.planHash,
      prune: ctx.input.prune,
      document: JSON.stringify(after),
      counts: JSON.stringify(counts),
      calls,
      actor: ctx.identity?.principalId ?? null,
      request_id: ctx.requestId,
      applied_at: now,
    })
    .execute();
  // The fleet is what this apply left: converged, until the drift job sees otherwise.
  await db
    .insertInto('compute.fleet_drift')
    .values({
      tenant_id: ctx.tenantId,
      apply_id: id,
      state: 'converged',
      changes: '[]',
      checked_at: now,
      since: null,
    })
    .onConflict((oc) =>
      oc
        .column('tenant_id')
        .doUpdateSet({ apply_id: id, state: 'converged', changes: '[]', checked_at: now, since: null }),
    )
    .execute();
  ctx.emit({
    type: 'fleet.applied',
    subject: { type: 'fleet', id },
    data: { planHash: plan.planHash, calls, changes: counts, prune: ctx.input.prune },
  });
  return {
    applyId: id,
    tenantId: ctx.tenantId,
    planHash: plan.planHash,
    counts: plan.counts,
    calls,
    appliedAt: now.toISOString(),
  };
}

/** A transaction's lock on a tenant's fleet configuration: applies and drift checks take turns. */
export async function lockFleet(db: Kysely<ComputeTables>, tenantId: string): Promise<void> {
  // Raw SQL: an advisory lock names no table; it ends with the transaction.
  await sql`select pg_advisory_xact_lock(hashtext(${`fleet-config:${tenantId}`}))`.execute(db);
}
