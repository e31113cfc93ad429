/**
 * Reservations and capacity: placement on the pool's free GPU groups, the queue (EASY backfill,
 * docs/decisions/queueing.md), activation, extension, release, expiry, and what capacity shows.
 *
 * Locks. Placement that may queue (and every activation, expiry and node change) runs under the
 * pool's row lock (FOR NO KEY UPDATE), so the queue, quotas and best fit read one consistent
 * picture. Two hot paths skip it: a reserve that needs one node and finds one (the node taken
 * with FOR UPDATE SKIP LOCKED), and a release while nothing is queued (its reservation row, then
 * its nodes in id order). Whatever holds node rows takes them in id order before waiting for
 * another, and binding GPUs never waits for a node (SKIP LOCKED), so waits cannot form a cycle:
 * order is pool → reservation rows → node rows (id order) → GPU groups and GPUs. A node's state is
 * checked again under its row lock when GPUs are bound, so a node cordoned, drained or gone offline
 * concurrently never receives new work; and the partial unique index `gpu_bindings_one_active`
 * refuses a second active binding of one GPU whatever the code above it does.
 */
import { ComputeError, newId } from '@better-compute/core';
import { sql, type RawBuilder, type Selectable } from 'kysely';
import type { CallContext } from '../define-module.js';
import { checkVersion, iso, isoOrNull, notFound } from '../fleet/common.js';
import { completeDrains, type Emit } from '../fleet/node-states.js';
import { heldBy, quotaLimits, visiblePool } from '../fleet/pools.js';
import type { EndReason, FleetDb, ReservationsTable } from '../fleet/tables.js';
import { fleetDb } from '../fleet/tables.js';
import { type Allocation, earliestFit, type FreeGroup, place } from './placement.js';
import { requestTerms, type SelectorTerm } from './selector.js';

type ReservationRow = Selectable<ReservationsTable>;

export interface PlacementRequest {
  poolId: string;
  gpus: number;
  durationSeconds: number;
  nvlink: boolean;
  selector?: string | null | undefined;
  gpuModel?: string | null | undefined;
  gpuProduct?: string | null | undefined;
  tolerations: readonly string[];
}

const NUMERIC_OPS = new Set(['>=', '<=', '>', '<']);
const MAX_QUEUE_SCAN = 200;

/** Takes the pool's lock: reserves, releases and activations on one pool run one at a time. */
export async function lockPool(db: FleetDb, poolId: string): Promise<void> {
  await db.selectFrom('compute.pools').select('id').where('id', '=', poolId).forNoKeyUpdate().execute();
}

function termSql(term: SelectorTerm): RawBuilder<boolean> {
  const column =
    term.field === 'gpuModel'
      ? sql.ref('g.model')
      : term.field === 'gpuProduct'
        ? sql.ref('g.product')
        : term.field === 'vramGiB'
          ? sql.ref('g.vram_gib')
          : null;
  if (term.field === 'vramGiB') {
    const values = term.values.map(Number);
    switch (term.operator) {
      case 'in':
        return sql<boolean>`${column} in (${sql.join(values)})`;
      case 'notin':
        return sql<boolean>`${column} not in (${sql.join(values)})`;
      case '!=':
        return sql<boolean>`${column} <> ${values[0]}`;
      default:
        // The operator comes from the parser's closed set.
        return sql<boolean>`${column} ${sql.raw(term.operator)} ${values[0]}`;
    }
  }
  // Raw SQL: jsonb ->> has no Kysely builder; a missing label is NULL, which = and in never match.
  const actual = column ?? sql<string>`(n.labels ->> ${term.key})`;
  switch (term.operator) {
    case '=':
      return sql<boolean>`${actual} = ${term.values[0]}`;
    case '!=':
      return sql<boolean>`${actual} is distinct from ${term.values[0]}`;
    case 'in':
      return sql<boolean>`${actual} in (${sql.join(term.values)})`;
    case 'notin':
      return sql<boolean>`coalesce(${actual} not in (${sql.join(term.values)}), true)`;
    default:
      if (!NUMERIC_OPS.has(term.operator)) throw new Error(`unknown operator ${term.operator}`);
      return sql<boolean>`(case when ${actual} ~ '^-?[0-9]+(\\.[0-9]+)?$' then (${actual})::numeric ${sql.raw(term.operator)} ${Number(term.values[0])} else false end)`;
  }
}

/** The request's filter over `g` (gpu_groups) and `n` (nodes): its terms and the nodes' NoSchedule taints. */
function filterSql(
  terms: readonly SelectorTerm[],
  tolerations: readonly string[] | null,
): RawBuilder<boolean> {
  const taints =
    tolerations === null
      ? sql<boolean>`true`
      : tolerations.length === 0
        ? sql<boolean>`cardinality(n.no_schedule) = 0`
        : sql<boolean>`(cardinality(n.no_schedule) = 0 or n.no_schedule <@ ${sql.val([...tolerations])}::text[])`;
  return sql.join([taints, ...terms.map(termSql)], sql` and `) as RawBuilder<boolean>;
}

function groupsQuery(db: FleetDb, poolId: string, filter: RawBuilder<boolean>) {
  return db
    .selectFrom('compute.gpu_groups as g')
    .innerJoin('compute.nodes as n', 'n.id', 'g.node_id')
    .select(['g.node_id', 'n.seq', 'g.group_no', 'g.nvlink_domain', 'g.free'])
    .where('g.pool_id', '=', poolId)
    .where('n.state', '=', 'ready')
    .where('g.free', '>', 0)
    .where(filter);
}

const toFree = (
  rows: { node_id: string; seq: number; group_no: number; nvlink_domain: string | null; free: number }[],
): FreeGroup[] =>
  rows.map((r) => ({
    nodeId: r.node_id,
    nodeSeq: Number(r.seq),
    groupNo: r.group_no,
    nvlinkDomain: r.nvlink_domain,
    free: r.free,
  }));

/** Where the request fits now on the pool's ready nodes, or null. Reads; binds nothing. */
export async function findPlacement(
  db: FleetDb,
  request: PlacementRequest,
  terms: readonly SelectorTerm[],
): Promise<Allocation[] | null> {
  const filter = filterSql(terms, request.tolerations);
  const { poolId, gpus } = request;
  if (!request.nvlink || gpus === 1) {
    const gpuFields = terms.some((t) => t.field !== null);
    let nodeId: string | undefined;
    if (!gpuFields) {
      // The common case reads one row of the nodes_fit index: the ready node with the fewest free GPUs that fit.
      const row = await db
        .selectFrom('compute.nodes as n')
        .select('n.id')
        .where('n.pool_id', '=', poolId)
        .where('n.state', '=', 'ready')
        .where('n.free_gpus', '>=', gpus)
        .where(filterSql(terms, request.tolerations))
        .orderBy('n.free_gpus')
        .orderBy('n.seq')
        .limit(1)
        .executeTakeFirst();
      nodeId = row?.id;
    } else {
      const row = await db
        .selectFrom('compute.gpu_groups as g')
        .innerJoin('compute.nodes as n', 'n.id', 'g.node_id')
        .select(['g.node_id', sql<number>`min(n.seq)`.as('seq'), sql<number>`sum(g.free)::int`.as('free')])
        .where('g.pool_id', '=', poolId)
        .where('n.state', '=', 'ready')
        .where('g.free', '>', 0)
        .where(filter)
        .groupBy('g.node_id')
        .having(sql`sum(g.free)`, '>=', gpus)
        .orderBy(sql`sum(g.free)`)
        .orderBy(sql`min(n.seq)`)
        .limit(1)
        .executeTakeFirst();
      nodeId = row?.node_id;
    }
    if (nodeId) {
      const groups = await groupsQuery(db, poolId, filter)
        .where('g.node_id', '=', nodeId)
        .orderBy('g.group_no')
        .execute();
      const fit = place(toFree(groups), gpus, false);
      if (fit) return fit;
    }
    const all = await groupsQuery(db, poolId, filter).orderBy('n.seq').orderBy('g.group_no').execute();
    return place(toFree(all), gpus, false);
  }
  const domain = await db
    .selectFrom('compute.gpu_groups as g')
    .innerJoin('compute.nodes as n', 'n.id', 'g.node_id')
    .select(['g.nvlink_domain', sql<number>`sum(g.free)::int`.as('free')])
    .where('g.pool_id', '=', poolId)
    .where('n.state', '=', 'ready')
    .where('g.free', '>', 0)
    .where('g.nvlink_domain', 'is not', null)
    .where(filter)
    .groupBy('g.nvlink_domain')
    .having(sql`sum(g.free)`, '>=', gpus)
    .orderBy(sql`sum(g.free)`)
    .orderBy('g.nvlink_domain')
    .limit(1)
    .executeTakeFirst();
  if (!domain?.nvlink_domain) return null;
  const groups = await groupsQuery(db, poolId, filter)
    .where('g.nvlink_domain', '=', domain.nvlink_domain)
    .orderBy('n.seq')
    .orderBy('g.group_no')
    .execute();
  return place(toFree(groups), gpus, true);
}

/**
 * Binds the allocation's GPUs to the reservation: nodes locked in id order and checked ready, free
 * counts decremented, GPU rows claimed only while unclaimed, bindings inserted under the unique
 * index. False when a node stopped being ready since placement (the caller places again).
 */
async function bind(
  db: FleetDb,
  reservation: { id: string; tenant_id: string; pool_id: string },
  allocations: Allocation[],
  now: Date,
  /** The caller already holds the (one) node's lock and saw it ready with room. */
  nodeLocked = false,
): Promise<boolean> {
  const perNode = new Map<string, number>();
  for (const a of allocations) perNode.set(a.nodeId, (perNode.get(a.nodeId) ?? 0) + a.count);
  const nodeIds = [...perNode.keys()].sort();
  if (!nodeLocked) {
    // SKIP LOCKED: binding never waits for a node, so it cannot close a cycle of waits with a release
    // that holds the node (see the header); a node busy now is simply not used this time.
    const locked = await db
      .selectFrom('compute.nodes')
      .select(['id', 'state', 'free_gpus'])
      .where('id', 'in', nodeIds)
      .orderBy('id')
      .forUpdate()
      .skipLocked()
      .execute();
    if (
      locked.length !== nodeIds.length ||
      locked.some((n) => n.state !== 'ready' || n.free_gpus < perNode.get(n.id)!)
    )
      return false;
  }
  for (const nodeId of nodeIds) {
    await db
      .updateTable('compute.nodes')
      .set((eb) => ({ free_gpus: eb('free_gpus', '-', perNode.get(nodeId)!) }))
      .where('id', '=', nodeId)
      .execute();
  }
  const bindings: {
    node_id: string;
    idx: number;
    group_no: number;
    model: string;
    product: string;
    nvlink_domain: string | null;
  }[] = [];
  for (const a of [...allocations].sort((x, y) =>
    x.nodeId < y.nodeId ? -1 : x.nodeId > y.nodeId ? 1 : x.groupNo - y.groupNo,
  )) {
    await db
      .updateTable('compute.gpu_groups')
      .set((eb) => ({ free: eb('free', '-', a.count) }))
      .where('node_id', '=', a.nodeId)
      .where('group_no', '=', a.groupNo)
      .execute();
    // Raw SQL: claim the lowest free indices of the group in one statement; `reservation_id is null`
    // is checked again on the locked rows, so a GPU is never claimed twice.
    const claimed = await sql<{
      idx: number;
      group_no: number;
      model: string;
      product: string;
      nvlink_domain: string | null;
    }>`
      update compute.gpus set reservation_id = ${reservation.id}
      where node_id = ${a.nodeId} and reservation_id is null and idx in (
        select idx from compute.gpus where node_id = ${a.nodeId} and group_no = ${a.groupNo} and reservation_id is null
        order by idx limit ${a.count})
      returning idx, group_no, model, product, nvlink_domain`.execute(db);
    if (claimed.rows.length !== a.count) {
      throw new ComputeError('INTERNAL', `node ${a.nodeId} has fewer free GPUs than its counters say`);
    }
    bindings.push(...claimed.rows.map((r) => ({ node_id: a.nodeId, ...r })));
  }
  await db
    .insertInto('compute.gpu_bindings')
    .values(
      bindings
        .sort((x, y) => (x.node_id < y.node_id ? -1 : x.node_id > y.node_id ? 1 : x.idx - y.idx))
        .map((b) => ({
          reservation_id: reservation.id,
          tenant_id: reservation.tenant_id,
          pool_id: reservation.pool_id,
          node_id: b.node_id,
          gpu_index: b.idx,
          group_no: b.group_no,
          model: b.model,
          product: b.product,
          nvlink_domain: b.nvlink_domain,
          bound_at: now,
        })),
    )
    .execute();
  return true;
}

/** Places and binds, placing again if a node changed state in between. */
async function placeAndBind(db: FleetDb, reservation: ReservationRow, now: Date): Promise<boolean> {
  const terms = requestTerms({
    selector: reservation.selector,
    gpuModel: reservation.gpu_model,
    gpuProduct: reservation.gpu_product,
  });
  const request = requestOf(reservation);
  for (let attempt = 0; attempt < 5; attempt++) {
    const allocations = await findPlacement(db, request, terms);
    if (!allocations) return false;
    if (await bind(db, reservation, allocations, now)) return true;
  }
  return false;
}

function requestOf(row: ReservationRow): PlacementRequest {
  return {
    poolId: row.pool_id,
    gpus: row.gpus,
    durationSeconds: row.duration_seconds,
    nvlink: row.nvlink,
    selector: row.selector,
    gpuModel: row.gpu_model,
    gpuProduct: row.gpu_product,
    tolerations: row.tolerations,
  };
}

async function activate(db: FleetDb, row: ReservationRow, now: Date, emit: Emit): Promise<ReservationRow> {
  const endsAt = new Date(now.getTime() + row.duration_seconds * 1000);
  const updated = await db
    .updateTable('compute.reservations')
    .set({ state: 'active', activated_at: now, ends_at: endsAt, version: row.version + 1 })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  const binding = await bindingOf(db, [row.id]);
  emit({
    type: 'reservation.activated',
    tenantId: row.tenant_id,
    subject: { type: 'reservation', id: row.id },
    data: {
      state: 'active',
      poolId: row.pool_id,
      gpus: row.gpus,
      endsAt: iso(endsAt),
      binding: (binding.get(row.id) ?? []).map(({ nodeState: _s, ...b }) => b),
      version: updated.version,
    },
  });
  return updated;
}

/** Whether the tenant's quota on the pool lets `row` hold its GPUs (`activeOnly` at activation). */
async function quotaAllows(
  db: FleetDb,
  tenantId: string,
  poolId: string,
  gpus: number,
  activeOnly: boolean,
): Promise<{ ok: boolean; resource?: 'gpus' | 'reservations'; limit?: number; used?: number }> {
  // Read under the pool's lock, which every reserve of a tenant with a quota on the pool takes.
  const limits = await quotaLimits(db, tenantId, poolId);
  if (limits.gpus === null && limits.reservations === null) return { ok: true };
  const held = await heldBy(db, tenantId, poolId, activeOnly);
  if (limits.gpus !== null && held.gpus + gpus > limits.gpus)
    return { ok: false, resource: 'gpus', limit: limits.gpus, used: held.gpus };
  if (limits.reservations !== null && held.reservations + 1 > limits.reservations)
    return { ok: false, resource: 'reservations', limit: limits.reservations, used: held.reservations };
  return { ok: true };
}

/** The pool's releases to come: GPUs per group and the time their reservation ends. */
async function releasesOf(db: FleetDb, poolId: string) {
  const rows = await db
    .selectFrom('compute.gpu_bindings as b')
    .innerJoin('compute.reservations as r', 'r.id', 'b.reservation_id')
    .innerJoin('compute.nodes as n', 'n.id', 'b.node_id')
    .select(['b.node_id', 'b.group_no', 'r.ends_at', sql<number>`count(*)::int`.as('count')])
    .where('b.pool_id', '=', poolId)
    .where('b.released_at', 'is', null)
    .where('n.state', '=', 'ready')
    .groupBy(['b.node_id', 'b.group_no', 'r.ends_at'])
    .execute();
  return rows.map((r) => ({
    nodeId: r.node_id,
    groupNo: r.group_no,
    count: r.count,
    at: new Date(r.ends_at ?? 0).getTime(),
  }));
}

/** Every matching group on the pool's ready nodes (free or not), for the earliest-start estimate. */
async function matchingGroups(
  db: FleetDb,
  request: PlacementRequest,
  terms: readonly SelectorTerm[],
): Promise<FreeGroup[]> {
  const rows = await db
    .selectFrom('compute.gpu_groups as g')
    .innerJoin('compute.nodes as n', 'n.id', 'g.node_id')
    .select(['g.node_id', 'n.seq', 'g.group_no', 'g.nvlink_domain', 'g.free'])
    .where('g.pool_id', '=', request.poolId)
    .where('n.state', '=', 'ready')
    .where(filterSql(terms, request.tolerations))
    .orderBy('n.seq')
    .orderBy('g.group_no')
    .execute();
  return toFree(rows);
}

/** When the request could start, given the running reservations' end times; null when never on these nodes. */
export async function earliestStart(
  db: FleetDb,
  request: PlacementRequest,
  terms: readonly SelectorTerm[],
  now: Date,
): Promise<Date | null> {
  const groups = await matchingGroups(db, request, terms);
  const at = earliestFit(
    groups,
    await releasesOf(db, request.poolId),
    request.gpus,
    request.nvlink,
    now.getTime(),
  );
  return at === null ? null : new Date(at);
}

/**
 * Starts queued reservations of a pool that fit now, in queue order, with EASY backfill: the first
 * one that does not fit gets a start time (its shadow), and later ones may start only if they end
 * by then, so backfilling never delays the head of the queue. Takes the pool lock.
 */
export async function activateQueue(db: FleetDb, poolId: string, now: Date, emit: Emit): Promise<string[]> {
  await lockPool(db, poolId);
  const queued = await db
    .selectFrom('compute.reservations')
    .selectAll()
    .where('pool_id', '=', poolId)
    .where('state', '=', 'queued')
    .orderBy('seq')
    .limit(MAX_QUEUE_SCAN)
    .execute();
  if (queued.length === 0) return [];
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
  const activated: string[] = [];
  for (const row of queued) {
    if (free <= 0) break;
    const shape = shapeOf(row);
    if (row.gpus > free || row.gpus >= (failed.get(shape) ?? Infinity)) {
      head ??= row;
      continue;
    }
    const quota = await quotaAllows(db, row.tenant_id, row.pool_id, row.gpus, true);
    if (!quota.ok) continue; // held back by its own tenant's quota, not by capacity: it blocks no one
    if (head) {
      if (shadow === undefined) shadow = await shadowOf(db, head, now);
      if (shadow !== null && now.getTime() + row.duration_seconds * 1000 > shadow) continue;
    }
    if (await placeAndBind(db, row, now)) {
      await activate(db, row, now, emit);
      activated.push(row.id);
      free -= row.gpus;
    } else {
      failed.set(shape, Math.min(row.gpus, failed.get(shape) ?? Infinity));
      head ??= row;
    }
  }
  return activated;
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

/** Gives a reservation's GPUs back and ends it; drained nodes and the queue follow. The pool must be locked. */
async function endReservation(
  db: FleetDb,
  row: ReservationRow,
  reason: EndReason,
  now: Date,
  emit: Emit,
): Promise<ReservationRow> {
  let nodeIds: string[] = [];
  if (row.state === 'active') {
    const released = await db
      .updateTable('compute.gpu_bindings')
      .set({ released_at: now })
      .where('reservation_id', '=', row.id)
      .where('released_at', 'is', null)
      .returning(['node_id', 'group_no'])
      .execute();
    await db
      .updateTable('compute.gpus')
      .set({ reservation_id: null })
      .where('reservation_id', '=', row.id)
      .execute();
    const perGroup = new Map<string, { nodeId: string; groupNo: number; count: number }>();
    for (const b of released) {
      const key = `${b.node_id}/${b.group_no}`;
      const entry = perGroup.get(key) ?? { nodeId: b.node_id, groupNo: b.group_no, count: 0 };
      entry.count++;
      perGroup.set(key, entry);
    }
    const perNode = new Map<string, number>();
    for (const g of perGroup.values()) perNode.set(g.nodeId, (perNode.get(g.nodeId) ?? 0) + g.count);
    for (const nodeId of [...perNode.keys()].sort()) {
      const node = await db
        .updateTable('compute.nodes')
        .set((eb) => ({ free_gpus: eb('free_gpus', '+', perNode.get(nodeId)!) }))
        .where('id', '=', nodeId)
        .returning('state')
        .executeTakeFirst();
      if (node?.state === 'draining') nodeIds.push(nodeId);
    }
    for (const g of perGroup.values()) {
      await db
        .updateTable('compute.gpu_groups')
        .set((eb) => ({ free: eb('free', '+', g.count) }))
        .where('node_id', '=', g.nodeId)
        .where('group_no', '=', g.groupNo)
        .execute();
    }
  }
  const updated = await db
    .updateTable('compute.reservations')
    .set({ state: 'ended', ended_at: now, end_reason: reason, version: row.version + 1 })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  const type =
    reason === 'expired'
      ? 'reservation.expired'
      : reason === 'node-retired'
        ? 'reservation.ended'
        : 'reservation.released';
  emit({
    type,
    tenantId: row.tenant_id,
    subject: { type: 'reservation', id: row.id },
    data: {
      state: 'ended',
      endReason: reason,
      previousState: row.state,
      poolId: row.pool_id,
      version: updated.version,
    },
  });
  await completeDrains(db, nodeIds, now, emit);
  return updated;
}

/** Locks, in id order, every node the given reservations hold GPUs on: before ending several at once. */
async function lockNodesOf(db: FleetDb, reservationIds: readonly string[]): Promise<void> {
  if (reservationIds.length === 0) return;
  await db
    .selectFrom('compute.nodes')
    .select('id')
    .where(
      'id',
      'in',
      db
        .selectFrom('compute.gpu_bindings')
        .select('node_id')
        .where('reservation_id', 'in', [...reservationIds])
        .where('released_at', 'is', null),
    )
    .orderBy('id')
    .forUpdate()
    .execute();
}

/** Ends every reservation bound to a node (it is being retired). The pool must be locked, the node not yet. */
export async function endReservationsOnNode(
  db: FleetDb,
  nodeId: string,
  now: Date,
  emit: Emit,
): Promise<void> {
  const ids = await db
    .selectFrom('compute.gpu_bindings')
    .select('reservation_id')
    .distinct()
    .where('node_id', '=', nodeId)
    .where('released_at', 'is', null)
    .execute();
  if (ids.length === 0) return;
  const rows = await db
    .selectFrom('compute.reservations')
    .selectAll()
    .where(
      'id',
      'in',
      ids.map((r) => r.reservation_id),
    )
    .orderBy('seq')
    .forUpdate()
    .execute();
  await lockNodesOf(
    db,
    rows.map((r) => r.id),
  );
  for (const row of rows)
    if (row.state === 'active') await endReservation(db, row, 'node-retired', now, emit);
}

// ---------------------------------------------------------------------------------------------
// Reading reservations

export type BindingView = {
  nodeId: string;
  gpuIndices: number[];
  nvlinkDomain: string | null;
  gpuModel: string;
  gpuProduct: string;
  nodeState: string;
};

async function bindingOf(db: FleetDb, ids: string[]): Promise<Map<string, BindingView[]>> {
  const map = new Map<string, BindingView[]>();
  if (ids.length === 0) return map;
  const rows = await db
    .selectFrom('compute.gpu_bindings as b')
    .leftJoin('compute.nodes as n', 'n.id', 'b.node_id')
    .select([
      'b.reservation_id',
      'b.node_id',
      'b.gpu_index',
      'b.nvlink_domain',
      'b.model',
      'b.product',
      'n.state',
    ])
    .where('b.reservation_id', 'in', ids)
    .orderBy('b.reservation_id')
    .orderBy('b.node_id')
    .orderBy('b.gpu_index')
    .execute();
  for (const r of rows) {
    const list = map.get(r.reservation_id) ?? [];
    let entry = list.find((b) => b.nodeId === r.node_id);
    if (!entry) {
      entry = {
        nodeId: r.node_id,
        gpuIndices: [],
        nvlinkDomain: r.nvlink_domain,
        gpuModel: r.model,
        gpuProduct: r.product,
        nodeState: r.state ?? 'deleted',
      };
      list.push(entry);
    }
    entry.gpuIndices.push(r.gpu_index);
    if (entry.nvlinkDomain !== r.nvlink_domain) entry.nvlinkDomain = null;
    map.set(r.reservation_id, list);
  }
  return map;
}

async function queuePosition(db: FleetDb, row: ReservationRow): Promise<number | null> {
  if (row.state !== 'queued') return null;
  const ahead = await db
    .selectFrom('compute.reservations')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('pool_id', '=', row.pool_id)
    .where('state', '=', 'queued')
    .where('seq', '<=', row.seq)
    .executeTakeFirstOrThrow();
  return ahead.n;
}

function reservationView(row: ReservationRow, binding: BindingView[], position: number | null) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    poolId: row.pool_id,
    projectId: row.project_id,
    state: row.state,
    gpus: row.gpus,
    durationSeconds: row.duration_seconds,
    nvlink: row.nvlink,
    selector: row.selector,
    gpuModel: row.gpu_model,
    gpuProduct: row.gpu_product,
    tolerations: row.tolerations,
    health:
      row.state === 'active' && binding.some((b) => b.nodeState === 'offline')
        ? ('degraded' as const)
        : ('ok' as const),
    queuePosition: position,
    createdAt: iso(row.created_at),
    activatedAt: isoOrNull(row.activated_at),
    endsAt: isoOrNull(row.ends_at),
    endedAt: isoOrNull(row.ended_at),
    endReason: row.end_reason,
    binding,
    version: row.version,
  };
}

export type ReservationView = ReturnType<typeof reservationView>;

async function viewOf(db: FleetDb, row: ReservationRow): Promise<ReservationView> {
  return reservationView(
    row,
    (await bindingOf(db, [row.id])).get(row.id) ?? [],
    await queuePosition(db, row),
  );
}

async function loadReservation(
  db: FleetDb,
  tenantId: string,
  id: string,
  forUpdate = false,
): Promise<ReservationRow> {
  let query = db
    .selectFrom('compute.reservations')
    .selectAll()
    .where('id', '=', id)
    .where('tenant_id', '=', tenantId);
  if (forUpdate) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) throw notFound('reservation', id);
  return row;
}

export async function getReservation(ctx: CallContext<{ reservationId: string }>) {
  const db = fleetDb(ctx.db);
  return viewOf(db, await loadReservation(db, ctx.tenantId, ctx.input.reservationId));
}

export async function listReservations(
  ctx: CallContext<{
    state?: 'queued' | 'active' | 'ended' | undefined;
    poolId?: string | undefined;
    limit: number;
    cursor?: string | undefined;
  }>,
) {
  const db = fleetDb(ctx.db);
  let query = db.selectFrom('compute.reservations').selectAll().where('tenant_id', '=', ctx.tenantId);
  if (ctx.input.state) query = query.where('state', '=', ctx.input.state);
  if (ctx.input.poolId) query = query.where('pool_id', '=', ctx.input.poolId);
  if (ctx.input.cursor) query = query.where('id', '<', ctx.input.cursor);
  const rows = await query
    .orderBy('id', 'desc')
    .limit(ctx.input.limit + 1)
    .execute();
  const page = rows.slice(0, ctx.input.limit);
  const bindings = await bindingOf(
    db,
    page.map((r) => r.id),
  );
  const items: ReservationView[] = [];
  for (const row of page)
    items.push(reservationView(row, bindings.get(row.id) ?? [], await queuePosition(db, row)));
  return { items, nextCursor: rows.length > ctx.input.limit ? (page.at(-1)?.id ?? null) : null };
}

// ---------------------------------------------------------------------------------------------
// Changing reservations

export async function createReservation(
  ctx: CallContext<PlacementRequest & { projectId?: string | undefined }>,
) {
  const db = fleetDb(ctx.db);
  const { input } = ctx;
  const terms = requestTerms(input);
  const { pool } = await visiblePool(db, ctx.tenantId, input.poolId);
  if (pool.state !== 'active') throw new ComputeError('INVALID_STATE', `pool ${pool.id} is archived`);
  if (pool.class !== 'gpu')
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `pool ${pool.id} is a ${pool.class} pool; reservations take GPUs from gpu pools`,
      { details: { field: 'poolId' } },
    );
  if (input.projectId) {
    const project = await db
      .selectFrom('compute.projects')
      .select(['id', 'state'])
      .where('id', '=', input.projectId)
      .where('tenant_id', '=', ctx.tenantId)
      .executeTakeFirst();
    if (!project) throw notFound('project', input.projectId);
    if (project.state !== 'active')
      throw new ComputeError('INVALID_STATE', `project ${project.id} is archived`);
  }
  const now = ctx.now();
  const fast = await reserveFast(ctx, db, pool.id, terms, now);
  if (fast) return fast;
  await lockPool(db, pool.id);
  const quota = await quotaAllows(db, ctx.tenantId, pool.id, input.gpus, false);
  if (!quota.ok) throw quotaExceeded(ctx.tenantId, pool.id, input.gpus, quota);
  const queueAhead = await db
    .selectFrom('compute.reservations')
    .select('id')
    .where('pool_id', '=', pool.id)
    .where('state', '=', 'queued')
    .limit(1)
    .executeTakeFirst();
  const row = await db
    .insertInto('compute.reservations')
    .values({
      id: newId('reservation'),
      tenant_id: ctx.tenantId,
      pool_id: pool.id,
      project_id: input.projectId ?? null,
      state: 'queued',
      gpus: input.gpus,
      duration_seconds: input.durationSeconds,
      nvlink: input.nvlink,
      selector: input.selector?.trim() ? input.selector.trim() : null,
      gpu_model: input.gpuModel ?? null,
      gpu_product: input.gpuProduct ?? null,
      tolerations: [...input.tolerations],
      created_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({
    type: 'reservation.created',
    subject: { type: 'reservation', id: row.id },
    data: {
      state: 'queued',
      poolId: pool.id,
      gpus: row.gpus,
      durationSeconds: row.duration_seconds,
      nvlink: row.nvlink,
      version: row.version,
    },
  });
  let current = row;
  if (!queueAhead) {
    if (await placeAndBind(db, row, now)) current = await activate(db, row, now, ctx.emit);
  } else {
    const started = await activateQueue(db, pool.id, now, ctx.emit);
    if (started.includes(row.id)) current = await loadReservation(db, ctx.tenantId, row.id);
  }
  if (current.state === 'queued') {
    const never = (await earliestStartAmongAll(db, input, terms)) === null;
    if (never) {
      throw new ComputeError(
        'INVALID_ARGUMENT',
        `pool ${pool.id} has no ${input.nvlink ? 'NVLink domain' : 'set of nodes'} with ${input.gpus} GPUs matching this request`,
        {
          details: { field: 'gpus', poolId: pool.id, gpus: input.gpus, nvlink: input.nvlink },
          hint: 'Ask for fewer GPUs, drop --nvlink or loosen --selector; better-compute capacity shows what the pool has.',
        },
      );
    }
    ctx.emit({
      type: 'reservation.queued',
      subject: { type: 'reservation', id: row.id },
      data: { state: 'queued', poolId: pool.id, gpus: row.gpus },
    });
  }
  return viewOf(db, current);
}

function quotaExceeded(
  tenantId: string,
  poolId: string,
  gpus: number,
  quota: { resource?: string; limit?: number; used?: number },
): ComputeError {
  return new ComputeError(
    'QUOTA_EXCEEDED',
    `tenant ${tenantId} may hold ${quota.limit} ${quota.resource} on pool ${poolId} and holds ${quota.used}`,
    {
      details: {
        resource: quota.resource,
        limit: quota.limit,
        used: quota.used,
        requested: quota.resource === 'gpus' ? gpus : 1,
      },
      hint: 'Release a reservation, or ask the pool’s owner for more (quotas set).',
    },
  );
}

/**
 * The common reserve without the pool's lock: nothing is queued, no NVLink or GPU-field selector
 * (one node holds it), no quota for the tenant on the pool, and a ready node fits. The node is taken with FOR UPDATE SKIP LOCKED, so
 * concurrent reserves spread over the best-fitting nodes instead of queueing on one lock; this path
 * never waits for the pool or a node, so it cannot join a deadlock. Undefined when it does not
 * apply; the locked path then decides (place, or queue).
 */
async function reserveFast(
  ctx: CallContext<PlacementRequest & { projectId?: string | undefined }>,
  db: FleetDb,
  poolId: string,
  terms: readonly SelectorTerm[],
  now: Date,
): Promise<ReservationView | undefined> {
  const { input } = ctx;
  if ((input.nvlink && input.gpus > 1) || terms.some((t) => t.field !== null)) return undefined;
  const queued = await db
    .selectFrom('compute.reservations')
    .select('id')
    .where('pool_id', '=', poolId)
    .where('state', '=', 'queued')
    .limit(1)
    .executeTakeFirst();
  if (queued) return undefined;
  // A tenant with a quota on the pool takes the locked path, where its holdings are counted consistently.
  const limits = await quotaLimits(db, ctx.tenantId, poolId);
  if (limits.gpus !== null || limits.reservations !== null) return undefined;
  const node = await db
    .selectFrom('compute.nodes as n')
    .select('n.id')
    .where('n.pool_id', '=', poolId)
    .where('n.state', '=', 'ready')
    .where('n.free_gpus', '>=', input.gpus)
    .where(filterSql(terms, input.tolerations))
    .orderBy('n.free_gpus')
    .orderBy('n.seq')
    .limit(1)
    .forUpdate()
    .skipLocked()
    .executeTakeFirst();
  if (!node) return undefined;
  const groups = await groupsQuery(db, poolId, filterSql(terms, input.tolerations))
    .where('g.node_id', '=', node.id)
    .orderBy('g.group_no')
    .execute();
  const allocations = place(toFree(groups), input.gpus, false);
  if (!allocations) return undefined;
  const row = await db
    .insertInto('compute.reservations')
    .values({
      id: newId('reservation'),
      tenant_id: ctx.tenantId,
      pool_id: poolId,
      project_id: input.projectId ?? null,
      state: 'queued',
      gpus: input.gpus,
      duration_seconds: input.durationSeconds,
      nvlink: input.nvlink,
      selector: input.selector?.trim() ? input.selector.trim() : null,
      gpu_model: input.gpuModel ?? null,
      gpu_product: input.gpuProduct ?? null,
      tolerations: [...input.tolerations],
      created_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  if (!(await bind(db, row, allocations, now, true)))
    throw new ComputeError('INTERNAL', `node ${node.id} changed under its lock`);
  ctx.emit({
    type: 'reservation.created',
    subject: { type: 'reservation', id: row.id },
    data: {
      state: 'queued',
      poolId,
      gpus: row.gpus,
      durationSeconds: row.duration_seconds,
      nvlink: row.nvlink,
      version: row.version,
    },
  });
  return viewOf(db, await activate(db, row, now, ctx.emit));
}

/** Whether the request could ever fit on the pool's nodes that may take work again (every state but retired). */
async function earliestStartAmongAll(
  db: FleetDb,
  request: PlacementRequest,
  terms: readonly SelectorTerm[],
): Promise<true | null> {
  const rows = await db
    .selectFrom('compute.gpu_groups as g')
    .innerJoin('compute.nodes as n', 'n.id', 'g.node_id')
    .select(['g.node_id', 'n.seq', 'g.group_no', 'g.nvlink_domain', 'g.total as free'])
    .where('g.pool_id', '=', request.poolId)
    .where('n.state', 'not in', ['retired'])
    // Taints are left out: they come and go, and a tainted pool may take the request later.
    .where(filterSql(terms, null))
    .execute();
  return place(toFree(rows), request.gpus, request.nvlink) ? true : null;
}

export async function extendReservation(
  ctx: CallContext<{ reservationId: string; bySeconds: number; ifVersion?: number | undefined }>,
) {
  const db = fleetDb(ctx.db);
  const row = await loadReservation(db, ctx.tenantId, ctx.input.reservationId, true);
  checkVersion('reservation', row.id, row.version, ctx.input.ifVersion);
  if (row.state === 'ended') {
    throw new ComputeError('INVALID_STATE', `reservation ${row.id} has ended (${row.end_reason})`, {
      details: { state: row.state, endReason: row.end_reason },
    });
  }
  const duration = row.duration_seconds + ctx.input.bySeconds;
  if (duration > 30 * 86_400) {
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `a reservation lasts at most 30 days; this one would last ${duration} s`,
      { details: { field: 'bySeconds' } },
    );
  }
  const endsAt = row.ends_at ? new Date(new Date(row.ends_at).getTime() + ctx.input.bySeconds * 1000) : null;
  const updated = await db
    .updateTable('compute.reservations')
    .set({ duration_seconds: duration, ends_at: endsAt, version: row.version + 1 })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({
    type: 'reservation.extended',
    subject: { type: 'reservation', id: row.id },
    data: {
      state: row.state,
      bySeconds: ctx.input.bySeconds,
      durationSeconds: duration,
      endsAt: isoOrNull(endsAt),
      version: updated.version,
    },
  });
  return viewOf(db, updated);
}

/**
 * Releases a reservation. With nothing queued in the pool, an active reservation is released
 * without the pool's lock (its row, then its nodes in id order), since no queued work needs the
 * GPUs; otherwise under the lock, and the queue is tried at once. A reserve that queued in the
 * meantime is started by the next controller pass.
 */
export async function releaseReservation(
  ctx: CallContext<{ reservationId: string; ifVersion?: number | undefined }>,
) {
  const db = fleetDb(ctx.db);
  const peek = await loadReservation(db, ctx.tenantId, ctx.input.reservationId);
  const queued =
    peek.state === 'queued' ||
    (await db
      .selectFrom('compute.reservations')
      .select('id')
      .where('pool_id', '=', peek.pool_id)
      .where('state', '=', 'queued')
      .limit(1)
      .executeTakeFirst()) !== undefined;
  if (queued) await lockPool(db, peek.pool_id);
  const row = await loadReservation(db, ctx.tenantId, ctx.input.reservationId, true);
  checkVersion('reservation', row.id, row.version, ctx.input.ifVersion);
  if (row.state === 'ended') return viewOf(db, row);
  if (row.state === 'queued' && !queued) await lockPool(db, row.pool_id); // activated or queued since the peek: cannot happen to a queued one, kept for safety
  const now = ctx.now();
  const ended = await endReservation(
    db,
    row,
    row.state === 'queued' ? 'cancelled' : 'released',
    now,
    ctx.emit,
  );
  if (queued) await activateQueue(db, row.pool_id, now, ctx.emit);
  return viewOf(db, ended);
}

/** Ends active reservations of the pool whose time is up, then starts what now fits. */
export async function expirePool(db: FleetDb, poolId: string, now: Date, emit: Emit): Promise<number> {
  await lockPool(db, poolId);
  const due = await db
    .selectFrom('compute.reservations')
    .selectAll()
    .where('pool_id', '=', poolId)
    .where('state', '=', 'active')
    .where('ends_at', '<=', now)
    .orderBy('ends_at')
    .orderBy('seq')
    .limit(500)
    .forUpdate()
    .execute();
  await lockNodesOf(
    db,
    due.map((r) => r.id),
  );
  for (const row of due) await endReservation(db, row, 'expired', now, emit);
  await activateQueue(db, poolId, now, emit);
  return due.length;
}

// ---------------------------------------------------------------------------------------------
// Capacity

export async function getCapacity(ctx: CallContext<{ poolId?: string | undefined }>) {
  const db = fleetDb(ctx.db);
  let pools = db
    .selectFrom('compute.pools')
    .select(['id', 'name', 'class'])
    .where('state', '=', 'active')
    .where((eb) =>
      eb.or([
        eb('tenant_id', '=', ctx.tenantId),
        eb(
          'id',
          'in',
          eb.selectFrom('compute.pool_offers').select('pool_id').where('tenant_id', '=', ctx.tenantId),
        ),
      ]),
    );
  if (ctx.input.poolId) pools = pools.where('id', '=', ctx.input.poolId);
  const poolRows = await pools.orderBy('id').execute();
  if (ctx.input.poolId && poolRows.length === 0) throw notFound('pool', ctx.input.poolId);
  const ids = poolRows.map((p) => p.id);
  if (ids.length === 0) return { items: [], nextCursor: null };
  // One pass over the groups' counters (one row per node and product), never over GPUs or reservations.
  const counts = await db
    .selectFrom('compute.gpu_groups as g')
    .innerJoin('compute.nodes as n', 'n.id', 'g.node_id')
    .select([
      'g.pool_id',
      'g.model',
      sql<number>`sum(g.total)::int`.as('total'),
      sql<number>`sum(g.total - g.free)::int`.as('reserved'),
      sql<number>`sum(case when n.state = 'ready' then g.free else 0 end)::int`.as('free'),
      sql<number>`sum(case when n.state = 'ready' then 0 else g.free end)::int`.as('unavailable'),
    ])
    .where('g.pool_id', 'in', ids)
    .where('n.state', '<>', 'retired')
    .groupBy(['g.pool_id', 'g.model'])
    .orderBy('g.pool_id')
    .orderBy('g.model')
    .execute();
  const queued = await db
    .selectFrom('compute.reservations')
    .select([
      'pool_id',
      sql<number>`count(*)::int`.as('n'),
      sql<number>`coalesce(sum(gpus), 0)::int`.as('gpus'),
    ])
    .where('pool_id', 'in', ids)
    .where('state', '=', 'queued')
    .groupBy('pool_id')
    .execute();
  return {
    items: poolRows.map((pool) => {
      const models = counts
        .filter((c) => c.pool_id === pool.id)
        .map((c) => ({
          gpuModel: c.model,
          total: c.total,
          reserved: c.reserved,
          free: c.free,
          unavailable: c.unavailable,
        }));
      const sum = (key: 'total' | 'reserved' | 'free' | 'unavailable') =>
        models.reduce((s, m) => s + m[key], 0);
      const q = queued.find((r) => r.pool_id === pool.id);
      return {
        poolId: pool.id,
        name: pool.name,
        class: pool.class,
        total: sum('total'),
        reserved: sum('reserved'),
        free: sum('free'),
        unavailable: sum('unavailable'),
        queuedReservations: q?.n ?? 0,
        queuedGpus: q?.gpus ?? 0,
        models,
      };
    }),
    nextCursor: null,
  };
}

export async function previewCapacity(ctx: CallContext<PlacementRequest>) {
  const db = fleetDb(ctx.db);
  const { input } = ctx;
  const terms = requestTerms(input);
  const { pool } = await visiblePool(db, ctx.tenantId, input.poolId);
  const now = ctx.now();
  const queued = await db
    .selectFrom('compute.reservations')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('pool_id', '=', pool.id)
    .where('state', '=', 'queued')
    .executeTakeFirstOrThrow();
  const allocations = await findPlacement(db, input, terms);
  if (allocations) {
    const details = await db
      .selectFrom('compute.gpu_groups')
      .select(['node_id', 'group_no', 'model', 'product', 'nvlink_domain'])
      .where('node_id', 'in', [...new Set(allocations.map((a) => a.nodeId))])
      .execute();
    const free = await db
      .selectFrom('compute.gpus')
      .select(['node_id', 'group_no', 'idx'])
      .where('node_id', 'in', [...new Set(allocations.map((a) => a.nodeId))])
      .where('reservation_id', 'is', null)
      .orderBy('node_id')
      .orderBy('idx')
      .execute();
    const placement = new Map<
      string,
      {
        nodeId: string;
        gpuIndices: number[];
        nvlinkDomain: string | null;
        gpuModel: string;
        gpuProduct: string;
      }
    >();
    for (const a of allocations) {
      const group = details.find((d) => d.node_id === a.nodeId && d.group_no === a.groupNo)!;
      const indices = free
        .filter((f) => f.node_id === a.nodeId && f.group_no === a.groupNo)
        .slice(0, a.count)
        .map((f) => f.idx);
      const entry = placement.get(a.nodeId) ?? {
        nodeId: a.nodeId,
        gpuIndices: [],
        nvlinkDomain: group.nvlink_domain,
        gpuModel: group.model,
        gpuProduct: group.product,
      };
      entry.gpuIndices.push(...indices);
      if (entry.nvlinkDomain !== group.nvlink_domain) entry.nvlinkDomain = null;
      placement.set(a.nodeId, entry);
    }
    for (const p of placement.values()) p.gpuIndices.sort((a, b) => a - b);
    return {
      fits: true,
      placement: [...placement.values()].sort((a, b) => (a.nodeId < b.nodeId ? -1 : 1)),
      earliestStartAt: iso(now),
      queuedAhead: queued.n,
      reason:
        queued.n > 0
          ? `${queued.n} reservation(s) are queued ahead; a reserve starts now only if it ends before the head of the queue can start`
          : null,
    };
  }
  const at = await earliestStart(db, input, terms, now);
  const ever = await earliestStartAmongAll(db, input, terms);
  return {
    fits: false,
    placement: null,
    earliestStartAt: at ? iso(at) : null,
    queuedAhead: queued.n,
    reason:
      ever === null
        ? `the pool has no ${input.nvlink ? 'NVLink domain' : 'set of nodes'} with ${input.gpus} matching GPUs`
        : at
          ? 'not enough matching GPUs are free now; the earliest start counts only reservations running now, not the queue'
          : 'the matching GPUs are on nodes that take no new work now (cordoned, draining, offline)',
  };
}
