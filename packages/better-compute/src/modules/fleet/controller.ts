/**
 * The fleet controller: nodes whose heartbeats stopped go offline (their reservations are told they
 * are degraded), reservations past their end expire, and queued reservations start as GPUs free.
 * Each pool is handled in its own transaction with its events; `fleet.controller` jobs run it, one
 * replica at a time under a lease, and the simulator calls `runFleetController` on its own clock.
 */
import { newId } from '@better-compute/core';
import { retryTransient } from '@better-compute/db';
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { writeEvents } from '../../db/unit-of-work.js';
import type { EventDraft, JobContext } from '../define-module.js';
import { type Emit, setNodeState } from './node-states.js';
import { OFFLINE_AFTER_SECONDS } from './nodes.js';
import { fleetDb, type FleetDb } from './tables.js';
import { acquireLease, LEASE_TTL_MS, leaseExpiresAt } from '../../workers/leases.js';
import { activateQueue } from './reservations/queue.js';
import { expirePool } from './reservations/extend-release.js';
import { reservationsOnNode } from './reservations/ending.js';

export const CONTROLLER_JOB = 'fleet.controller';
/** This process's name on the controller lease, so two replicas never run a pass at once. */
const HOLDER = `ctl_${newId('job').slice(4)}`;
const CONTROLLER_EVERY_MS = 5_000;

export interface ControllerReport {
  offline: number;
  expired: number;
  activated: number;
}

/** One transaction with its events; run again when PostgreSQL aborted it for meeting others. */
async function inTransaction(db: FleetDb, work: (trx: FleetDb, emit: Emit) => Promise<void>): Promise<void> {
  await retryTransient(() =>
    db.transaction().execute(async (trx) => {
      const events: EventDraft[] = [];
      await work(trx, (event) => void events.push(event));
      await writeEvents(trx as unknown as Kysely<ComputeTables>, events, {
        tenantId: 'root',
        actor: null,
        requestId: `ctl_${newId('request').slice(4)}`,
      });
    }),
  );
}

/** One pass of the controller at `now`. */
export async function runFleetController(
  database: Kysely<ComputeTables>,
  now: Date,
  options: {
    offlineAfterSeconds?: number;
    /**
     * Whether to try every pool's queue (default true). Releases, expiries, uncordons and heartbeats
     * already start what fits; this pass catches anything else that freed GPUs.
     */
    activateQueues?: boolean;
  } = {},
): Promise<ControllerReport> {
  const db = fleetDb(database);
  const report: ControllerReport = { offline: 0, expired: 0, activated: 0 };
  const cutoff = new Date(now.getTime() - (options.offlineAfterSeconds ?? OFFLINE_AFTER_SECONDS) * 1000);
  const silent = await db
    .selectFrom('compute.nodes')
    .select(['id', 'pool_id'])
    .where('state', 'in', ['ready', 'cordoned', 'draining', 'drained'])
    .where('last_heartbeat_at', '<', cutoff)
    .orderBy('seq')
    .limit(1000)
    .execute();
  for (const { id } of silent) {
    await inTransaction(db, async (trx, emit) => {
      const node = await trx
        .selectFrom('compute.nodes')
        .selectAll()
        .where('id', '=', id)
        .forUpdate()
        .executeTakeFirst();
      if (!node || node.state === 'offline' || node.state === 'retired' || node.state === 'joining') return;
      if (!node.last_heartbeat_at || new Date(node.last_heartbeat_at) >= cutoff) return;
      const before = node.state;
      await setNodeState(trx, node, 'offline', now, emit, {
        stateBeforeOffline: before,
        reason: 'no heartbeat',
      });
      for (const r of await reservationsOnNode(trx, id)) {
        emit({
          type: 'reservation.degraded',
          tenantId: r.tenant_id,
          subject: { type: 'reservation', id: r.id },
          data: { nodeId: id, reason: 'node-offline' },
        });
      }
      report.offline++;
    });
  }
  const duePools = await db
    .selectFrom('compute.reservations')
    .select('pool_id')
    .distinct()
    .where('state', '=', 'active')
    .where('ends_at', '<=', now)
    .orderBy('pool_id')
    .execute();
  for (const { pool_id } of duePools) {
    await inTransaction(db, async (trx, emit) => {
      report.expired += await expirePool(trx, pool_id, now, emit);
    });
  }
  if (options.activateQueues === false) return report;
  const queuedPools = await db
    .selectFrom('compute.reservations')
    .select('pool_id')
    .distinct()
    .where('state', '=', 'queued')
    .orderBy('pool_id')
    .execute();
  for (const { pool_id } of queuedPools) {
    await inTransaction(db, async (trx, emit) => {
      report.activated += (await activateQueue(trx, pool_id, now, emit)).length;
    });
  }
  return report;
}

/**
 * Its holder renews the controller lease every pass; when the holder dies, the passes of other
 * replicas retry right as it lapses, so the controller moves to a live replica within a lease's
 * time of the dead one's last pass (the pass's own job, if the dead replica held it, is claimed
 * again within the same time).
 */
const CONTROLLER_LEASE_MS = LEASE_TTL_MS;

/** The `fleet.controller` job: one pass under a lease, then the next pass is queued. */
export async function controllerJob(context: JobContext): Promise<void> {
  const now = context.now();
  let next = now.getTime() + CONTROLLER_EVERY_MS;
  try {
    if (
      await acquireLease(context.db, {
        name: CONTROLLER_JOB,
        holder: HOLDER,
        ttlMs: CONTROLLER_LEASE_MS,
        now,
      })
    ) {
      await runFleetController(context.db, now);
    } else {
      const expiresAt = await leaseExpiresAt(context.db, CONTROLLER_JOB);
      if (expiresAt) next = Math.max(now.getTime() + 50, Math.min(next, expiresAt.getTime() + 50));
    }
  } finally {
    // Raw SQL: queue the next pass unless one is already waiting, in one statement.
    await sql`
      insert into compute.jobs (id, kind, payload, run_at)
      select ${newId('job')}, ${CONTROLLER_JOB}, '{}'::jsonb, ${new Date(next)}
      where not exists (select 1 from compute.jobs where kind = ${CONTROLLER_JOB} and state = 'queued')`.execute(
      context.db,
    );
  }
}
