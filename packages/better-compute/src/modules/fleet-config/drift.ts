/**
 * Drift: whether the live fleet is still what the last apply left. The `fleet.drift` job compares
 * the fleet's export with the document kept at the apply (keyed by id on both sides), records the
 * verdict, and tells `fleet.drifted` or `fleet.converged` when it turns; `fleet.status` answers the
 * last verdict. What counts as drift is any difference in what the document holds: an object added,
 * gone, or with a field of its own changed (docs/decisions/fleet-config.md).
 */
import { canonicalJson, newId } from '@better-compute/core';
import type { FleetChange, FleetConfig, FleetObjectKind, FleetStatus } from '@better-compute/core/methods';
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { writeEvents } from '../../db/unit-of-work.js';
import { acquireLease, LEASE_TTL_MS } from '../../workers/leases.js';
import type { CallContext, JobContext } from '../define-module.js';
import { lockFleet } from './apply.js';
import { exportDocument, readLiveFleet } from './live.js';
import { SECTION } from './match.js';
import { fleetConfigDb } from './tables.js';

export const FLEET_DRIFT_JOB = 'fleet.drift';
/** How often the job looks. */
const FLEET_DRIFT_EVERY_MS = 60_000;
const HOLDER = `fleet_drift_${newId('job').slice(4)}`;

const KINDS: readonly FleetObjectKind[] = ['site', 'providerAccount', 'pool', 'flavor', 'sandboxTemplate'];

/** A spec's fields as compared: a pool's quotas one by one (`quotas.acme.gpus`), the rest whole. */
function flatFields(spec: Record<string, unknown>): Map<string, unknown> {
  const fields = new Map<string, unknown>();
  for (const [field, value] of Object.entries(spec)) {
    if (field !== 'quotas') {
      fields.set(field, value);
      continue;
    }
    for (const [tenant, limits] of Object.entries(value as Record<string, Record<string, number>>))
      for (const [resource, limit] of Object.entries(limits))
        fields.set(`quotas.${tenant}.${resource}`, limit);
  }
  return fields;
}

/**
 * What differs from `before` to `after`, both keyed by id: `+` an object added since, `-` one gone,
 * `~` one whose fields changed (from before's value to after's).
 */
function diffDocuments(before: FleetConfig, after: FleetConfig): FleetChange[] {
  const changes: FleetChange[] = [];
  for (const kind of KINDS) {
    // A document kept before provider accounts were in it may lack their section.
    const was = (before[SECTION[kind]] ?? {}) as Record<string, Record<string, unknown> & { name: string }>;
    const now = (after[SECTION[kind]] ?? {}) as Record<string, Record<string, unknown> & { name: string }>;
    const change = (op: FleetChange['op'], id: string, name: string, fields: FleetChange['fields'] = []) =>
      changes.push({ op, kind, key: id, id, name, fields, blocked: null });
    for (const [id, spec] of Object.entries(now)) if (!(id in was)) change('+', id, spec.name);
    for (const [id, spec] of Object.entries(was)) {
      const current = now[id];
      if (!current) {
        change('-', id, spec.name);
        continue;
      }
      const from = flatFields(spec);
      const to = flatFields(current);
      const fields = [...new Set([...from.keys(), ...to.keys()])]
        .filter((field) => canonicalJson(from.get(field) ?? null) !== canonicalJson(to.get(field) ?? null))
        .map((field) => ({ field, from: from.get(field) ?? null, to: to.get(field) ?? null }));
      if (fields.length) change('~', id, current.name, fields);
    }
  }
  return changes;
}

/** One tenant's check, in its own transaction: the verdict recorded, an event when it turns. */
async function checkTenant(
  db: Kysely<ComputeTables>,
  tenantId: string,
  now: Date,
): Promise<'converged' | 'drifted'> {
  return db.transaction().execute(async (trx) => {
    await lockFleet(trx, tenantId);
    const store = fleetConfigDb(trx);
    const row = await store
      .selectFrom('compute.fleet_drift')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .forUpdate()
      .executeTakeFirstOrThrow();
    const applied = await store
      .selectFrom('compute.fleet_applies')
      .select(['id', 'document'])
      .where('id', '=', row.apply_id)
      .executeTakeFirstOrThrow();
    const changes = diffDocuments(applied.document, exportDocument(await readLiveFleet(trx, tenantId)));
    const state = changes.length > 0 ? 'drifted' : 'converged';
    await store
      .updateTable('compute.fleet_drift')
      .set({
        state,
        changes: JSON.stringify(changes),
        checked_at: now,
        since: state === 'drifted' ? (row.state === 'drifted' && row.since ? row.since : now) : null,
      })
      .where('tenant_id', '=', tenantId)
      .execute();
    if (state !== row.state)
      await writeEvents(
        trx,
        [
          state === 'drifted'
            ? {
                type: 'fleet.drifted',
                subject: { type: 'fleet', id: applied.id },
                data: { changes: changes.length },
              }
            : { type: 'fleet.converged', subject: { type: 'fleet', id: applied.id }, data: {} },
        ],
        { tenantId, actor: null, requestId: `fleet-drift:${applied.id}` },
      );
    return state;
  });
}

/** Checks every tenant that has applied a document; answers each verdict. */
export async function checkFleetDrift(
  db: Kysely<ComputeTables>,
  now: Date,
): Promise<{ tenantId: string; state: 'converged' | 'drifted' }[]> {
  const tenants = await fleetConfigDb(db)
    .selectFrom('compute.fleet_drift')
    .select('tenant_id')
    .orderBy('tenant_id')
    .execute();
  const verdicts: { tenantId: string; state: 'converged' | 'drifted' }[] = [];
  for (const { tenant_id } of tenants)
    verdicts.push({ tenantId: tenant_id, state: await checkTenant(db, tenant_id, now) });
  return verdicts;
}

/** The `fleet.drift` job: one replica checks under a lease, then the next run is queued. */
export async function fleetDriftJob(context: JobContext): Promise<void> {
  const now = context.now();
  try {
    if (await acquireLease(context.db, { name: FLEET_DRIFT_JOB, holder: HOLDER, ttlMs: LEASE_TTL_MS, now }))
      await checkFleetDrift(context.db, now);
  } finally {
    // Raw SQL: queue the next run unless one is already waiting, in one statement.
    await sql`
      insert into compute.jobs (id, kind, payload, run_at)
      select ${newId('job')}, ${FLEET_DRIFT_JOB}, '{}'::jsonb, ${new Date(now.getTime() + FLEET_DRIFT_EVERY_MS)}
      where not exists (select 1 from compute.jobs where kind = ${FLEET_DRIFT_JOB} and state = 'queued')`.execute(
      context.db,
    );
  }
}

/** `fleet.status`: the last apply, and the drift job's last verdict on it. */
export async function fleetStatus(ctx: CallContext<unknown>): Promise<FleetStatus> {
  const store = fleetConfigDb(ctx.db);
  const applied = await store
    .selectFrom('compute.fleet_applies')
    .select(['id', 'applied_at', 'actor', 'plan_hash'])
    .where('tenant_id', '=', ctx.tenantId)
    .orderBy('seq', 'desc')
    .limit(1)
    .executeTakeFirst();
  const drift = await store
    .selectFrom('compute.fleet_drift')
    .selectAll()
    .where('tenant_id', '=', ctx.tenantId)
    .executeTakeFirst();
  const current = applied && drift && drift.apply_id === applied.id ? drift : undefined;
  return {
    tenantId: ctx.tenantId,
    applied: applied
      ? {
          id: applied.id,
          appliedAt: applied.applied_at.toISOString(),
          actor: applied.actor,
          planHash: applied.plan_hash,
        }
      : null,
    drift: {
      state: current?.state ?? 'unknown',
      checkedAt: current ? current.checked_at.toISOString() : null,
      since: current?.since ? current.since.toISOString() : null,
      changes: current?.changes ?? [],
    },
  };
}
