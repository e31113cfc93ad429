/**
 * The queue (EASY backfill, docs/decisions/queueing.md) and quotas: when a request could start,
 * which queued reservations start now, and whether a tenant's limits allow one more.
 */
import { sql } from 'kysely';
import { lockPool } from '../locks.js';
import type { Emit } from '../node-states.js';
import { heldBy, quotaLimits } from '../quotas.js';
import type { FleetDb } from '../tables.js';
import { activate, placeAndBind, requestOf } from './binding.js';
import type { ReservationRow } from './views.js';
import { endReservation } from './ending.js';
import { type PlacementRequest, filterSql, toFree } from './placement-sql.js';
import { earliestFit } from './placement.js';
import { type SelectorTerm, requestTerms } from './selector.js';

const MAX_QUEUE_SCAN = 200;

type Held = Awaited<ReturnType<typeof heldBy>>;
type QuotaVerdict = { ok: boolean; resource?: 'gpus' | 'reservations'; limit?: number; used?: number };

/** Whether what a tenant holds, plus one more reservation of `gpus`, stays within its limits. */
function withinQuota(
  limits: Awaited<ReturnType<typeof quotaLimits>>,
  held: Held,
  gpus: number,
): QuotaVerdict {
  if (limits.gpus !== null && held.gpus + gpus > limits.gpus)
    return { ok: false, resource: 'gpus', limit: limits.gpus, used: held.gpus };
  if (limits.reservations !== null && held.reservations + 1 > limits.reservations)
    return { ok: false, resource: 'reservations', limit: limits.reservations, used: held.reservations };
  return { ok: true };
}

/** Whether the tenant's quota on the pool lets a new reservation of `gpus` be made (queued or active count). */
export async function quotaAllows(
  db: FleetDb,
  tenantId: string,
  poolId: string,
  gpus: number,
): Promise<QuotaVerdict> {
  // Read under the pool's lock, which every reserve of a tenant with a quota on the pool takes.
  const limits = await quotaLimits(db, tenantId, poolId);
  if (limits.gpus === null && limits.reservations === null) return { ok: true };
  return withinQuota(limits, await heldBy(db, tenantId, poolId, false), gpus);
}

/**
 * When the request could start, given the running reservations' end times; null when never on these
 * nodes. Two reads whose cost follows the fleet, never the history: the matching groups on ready
 * nodes with their GPU slots, and the pool's running reservations (a partial index); the slots say
 * which GPUs each one gives back, and when.
 */
export async function earliestStart(
  db: FleetDb,
  request: PlacementRequest,
  terms: readonly SelectorTerm[],
  now: Date,
): Promise<Date | null> {
  const groups = await db
    .selectFrom('compute.gpu_groups as g')
    .innerJoin('compute.nodes as n', 'n.id', 'g.node_id')
    .select(['g.node_id', 'n.seq', 'g.group_no', 'g.nvlink_domain', 'g.free', 'g.holders'])
    .where('g.pool_id', '=', request.poolId)
    .where('n.state', '=', 'ready')
    .where(filterSql(terms, request.tolerations))
    .orderBy('n.seq')
    .orderBy('g.group_no')
    .execute();
  const running = await db
    .selectFrom('compute.reservations')
    .select(['id', 'ends_at'])
    .where('pool_id', '=', request.poolId)
    .where('state', '=', 'active')
    .execute();
  const endsAt = new Map(running.map((r) => [r.id, new Date(r.ends_at ?? 0).getTime()]));
  const releases: { nodeId: string; groupNo: number; count: number; at: number }[] = [];
  for (const g of groups) {
    const perReservation = new Map<string, number>();
    for (const holder of g.holders)
      if (holder !== null) perReservation.set(holder, (perReservation.get(holder) ?? 0) + 1);
    for (const [id, count] of perReservation) {
      const at = endsAt.get(id);
      if (at !== undefined) releases.push({ nodeId: g.node_id, groupNo: g.group_no, count, at });
    }
  }
  const at = earliestFit(toFree(groups), releases, request.gpus, request.nvlink, now.getTime());
  return at === null ? null : new Date(at);
}

/**
 * Starts queued reservations of a pool that fit now, in queue order, with EASY backfill: the first
 * one that does not fit gets a start time (its shadow), and later ones may start only if they end
 * by then, so backfilling never delays the head of the queue. Takes the pool lock.
 */
export async function activateQueue(db: FleetDb, poolId: string, now: Date, emit: Emit): Promise<string[]> {
  await lockPool(db, poolId);
  const queued = await queueOf(db, poolId);
  if (queued.length === 0) return [];
  // A request whose tenant may no longer use the pool (archived, or no longer offered to it) can
  // never start: it is cancelled, so it neither waits forever nor counts as queued ahead.
  const pool = await db
    .selectFrom('compute.pools')
    .select(['state', 'tenant_id'])
    .where('id', '=', poolId)
    .executeTakeFirstOrThrow();
  const offered = new Set(
    (
      await db.selectFrom('compute.pool_offers').select('tenant_id').where('pool_id', '=', poolId).execute()
    ).map((o) => o.tenant_id),
  );
  const mayUse = (tenantId: string) =>
    pool.state === 'active' && (tenantId === pool.tenant_id || offered.has(tenantId));
  for (const row of queued.filter((r) => !mayUse(r.tenant_id)))
    await endReservation(db, row, 'cancelled', now, emit);
  const waiting = queued.filter((r) => mayUse(r.tenant_id));
  if (waiting.length === 0) return [];
  const freeRow = await db
    .selectFrom('compute.nodes')
    .select(sql<number>`coalesce(sum(free_gpus), 0)::int`.as('free'))
    .where('pool_id', '=', poolId)
    .where('state', '=', 'ready')
    .executeTakeFirstOrThrow();
  let free = freeRow.free;
  // The first reservation that cannot start is the head; its start time (the shadow) is computed
  // only when a later one could otherwise start, since it costs a pass over the pool's groups.
  let head: ReservationRow | undefined;
  let shadow: number | null | undefined;
  // Shapes that did not fit: a request of the same shape and at least as many GPUs will not either.
  const failed = new Map<string, number>();
  const shapeOf = (row: ReservationRow) =>
    JSON.stringify([row.nvlink, row.selector, row.gpu_model, row.gpu_product, row.tolerations]);
  const quota = quotaGate(db, poolId);
  const activated: string[] = [];
  for (const row of waiting) {
    if (free <= 0) break;
    // One its own tenant's quota holds back blocks no one: it neither starts nor becomes the head,
    // whether or not it would fit, so its shadow never holds back another tenant's backfill.
    if (!(await quota.fits(row))) continue;
    const shape = shapeOf(row);
    if (row.gpus > free || row.gpus >= (failed.get(shape) ?? Infinity)) {
      head ??= row;
      continue;
    }
    if (head) {
      if (shadow === undefined) shadow = await shadowOf(db, head, now);
      if (shadow !== null && now.getTime() + row.duration_seconds * 1000 > shadow) continue;
    }
    const bound = await placeAndBind(db, row, now);
    if (bound) {
      await activate(db, row, now, emit, bound);
      activated.push(row.id);
      free -= row.gpus;
      quota.started(row);
    } else {
      failed.set(shape, Math.min(row.gpus, failed.get(shape) ?? Infinity));
      head ??= row;
    }
  }
  return activated;
}

/**
 * Whether each tenant's quota on the pool lets one more of its queued reservations start. Each
 * tenant's limits and active holdings are read once and kept current by `started` (under the pool's
 * lock nothing else changes them); read per queued reservation, they were hundreds of queries a pass.
 */
function quotaGate(db: FleetDb, poolId: string) {
  const quotas = new Map<string, { limits: Awaited<ReturnType<typeof quotaLimits>>; held: Held | null }>();
  return {
    async fits(row: ReservationRow): Promise<boolean> {
      let quota = quotas.get(row.tenant_id);
      if (!quota) {
        const limits = await quotaLimits(db, row.tenant_id, poolId);
        const limited = limits.gpus !== null || limits.reservations !== null;
        quota = { limits, held: limited ? await heldBy(db, row.tenant_id, poolId, true) : null };
        quotas.set(row.tenant_id, quota);
      }
      return !quota.held || withinQuota(quota.limits, quota.held, row.gpus).ok;
    },
    started(row: ReservationRow): void {
      const held = quotas.get(row.tenant_id)?.held;
      if (held) {
        held.gpus += row.gpus;
        held.reservations += 1;
      }
    },
  };
}

/** The pool's queued reservations in queue order, as far as one pass looks. */
function queueOf(db: FleetDb, poolId: string): Promise<ReservationRow[]> {
  return db
    .selectFrom('compute.reservations')
    .selectAll()
    .where('pool_id', '=', poolId)
    .where('state', '=', 'queued')
    .orderBy('seq')
    .limit(MAX_QUEUE_SCAN)
    .execute();
}

/**
 * When the pool's queue head can start (its shadow), in ms; null when there is none or it could
 * never start on the ready nodes. The head is the first queued reservation its tenant's quota does
 * not hold back, as activateQueue finds it (the pass has started every earlier one that fits).
 */
export async function queueHeadStart(db: FleetDb, poolId: string, now: Date): Promise<number | null> {
  const queued = await queueOf(db, poolId);
  const quota = quotaGate(db, poolId);
  for (const row of queued) if (await quota.fits(row)) return shadowOf(db, row, now);
  return null;
}

async function shadowOf(db: FleetDb, row: ReservationRow, now: Date): Promise<number | null> {
  const terms = requestTerms({
    selector: row.selector,
    gpuModel: row.gpu_model,
    gpuProduct: row.gpu_product,
  });
  const at = await earliestStart(db, requestOf(row), terms, now);
  return at === null ? null : at.getTime();
}
