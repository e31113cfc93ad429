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
 * order is pool → reservation rows → node rows (id order) → GPU groups. A node's state is checked
 * again under its row lock when GPUs are bound, so a node cordoned, drained or gone offline
 * concurrently never receives new work. Who holds a GPU is its slot in the group's row (`holders`):
 * a slot is claimed only while empty, under that row's lock, so no GPU is ever held twice.
 */
import { ComputeError, newId, ownerOf } from '@better-compute/core';
import { sentWithCommit } from '@better-compute/db';
import { CompiledQuery, type Kysely, sql, type RawBuilder, type Selectable } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { CallContext } from '../define-module.js';
import { checkVersion, iso, isoOrNull, notFound } from '../fleet/common.js';
import { completeDrains, type Emit, settleInventory } from '../fleet/node-states.js';
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
  if (!request.nvlink) {
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

/** GPUs of one group bound to a reservation (a binding row), and what a reservation's view is built from. */
interface BoundGroup {
  node_id: string;
  group_no: number;
  gpu_indices: number[];
  model: string;
  product: string;
  nvlink_domain: string | null;
}

/** Reservation columns to insert: a reserve that binds in the same statement inserts its row active. */
type NewReservation = {
  id: string;
  tenant_id: string;
  pool_id: string;
  project_id: string | null;
  state: 'active';
  gpus: number;
  duration_seconds: number;
  nvlink: boolean;
  selector: string | null;
  gpu_model: string | null;
  gpu_product: string | null;
  tolerations: string[];
  created_at: Date;
  owner_id: string | null;
  agent_id: string | null;
  activated_at: Date;
  ends_at: Date;
  version: number;
};

/** The columns of a new reservation that come from the request, whether it queues or binds at once. */
function requestedColumns(
  ctx: CallContext<PlacementRequest & { projectId?: string | undefined }>,
  poolId: string,
  now: Date,
) {
  const { input } = ctx;
  return {
    id: newId('reservation'),
    tenant_id: ctx.tenantId,
    pool_id: poolId,
    project_id: input.projectId ?? null,
    gpus: input.gpus,
    duration_seconds: input.durationSeconds,
    nvlink: input.nvlink,
    selector: input.selector?.trim() ? input.selector.trim() : null,
    gpu_model: input.gpuModel ?? null,
    gpu_product: input.gpuProduct ?? null,
    tolerations: [...input.tolerations],
    created_at: now,
    owner_id: ctx.identity ? ownerOf(ctx.identity) : null,
    agent_id: ctx.identity?.principalKind === 'agent' ? ctx.identity.principalId : null,
  };
}

/**
 * Where a bind's GPUs come from: allocations already placed (their nodes locked by the caller), or
 * a CTE named `pick` that locks one node and yields `(node_id, group_no, cnt)` rows, placement and
 * writes then being one statement (see reserveFast).
 */
type BindSource =
  | { allocations: readonly Allocation[] }
  | { pick: RawBuilder<unknown>; rows: RawBuilder<unknown>; gpus: number };

/**
 * The writes of a bind, in one statement (raw SQL: data-modifying CTEs have no Kysely builder): the
 * nodes' free counts decremented; in each group, the lowest empty slots given to the reservation
 * (`free >= cnt` is checked again on the locked row, so a slot is never taken twice); and one
 * binding row per group. With `insert`, the reservation row is inserted by the same statement, only
 * if there is something to bind. With a `pick` source that found nothing, nothing is written and
 * the bindings are empty.
 *
 * With `allocations`, placed from a read before their nodes were locked, a group may have fewer
 * free GPUs now than that read said while its node's total is still enough (another reservation
 * took GPUs of one group and released those of another): then nothing is written and `stale` is
 * true, so the caller places again. Those nodes are locked by the caller, so this statement's
 * snapshot reads their groups as they are.
 */
async function writeBinding(
  db: FleetDb,
  reservation: { id: string; tenant_id: string; pool_id: string },
  source: BindSource,
  now: Date,
  insert?: NewReservation,
): Promise<{
  bindings: BoundGroup[];
  row: ReservationRow | undefined;
  pickedNode: string | null;
  stale: boolean;
}> {
  const rows =
    'allocations' in source
      ? sql`values ${sql.join(
          source.allocations.map((a) => sql`(${a.nodeId}::text, ${a.groupNo}::int, ${a.count}::int)`),
        )}`
      : source.rows;
  const insertCte = insert
    ? sql`r as (
        insert into compute.reservations (id, tenant_id, pool_id, project_id, state, gpus, duration_seconds, nvlink,
          selector, gpu_model, gpu_product, tolerations, created_at, activated_at, ends_at, version, owner_id, agent_id)
        select ${insert.id}, ${insert.tenant_id}, ${insert.pool_id}, ${insert.project_id}, ${insert.state},
          ${insert.gpus}::int, ${insert.duration_seconds}::int, ${insert.nvlink}::boolean, ${insert.selector}::text,
          ${insert.gpu_model}::text, ${insert.gpu_product}::text, ${sql.val(insert.tolerations)}::text[],
          ${insert.created_at}::timestamptz, ${insert.activated_at}::timestamptz,
          ${insert.ends_at}::timestamptz, ${insert.version}::int, ${insert.owner_id}::text, ${insert.agent_id}::text
        where exists (select 1 from a) and (select ok from fits)
        returning *),`
    : sql``;
  // Whether every group still has the GPUs the allocations ask of it (always, for a pick: its
  // node's one group is counted by the node's free count, read under the pick's lock).
  const fitsCte =
    'allocations' in source
      ? sql`fits (ok) as (
          select count(*) = (select count(*) from a) from a
          join compute.gpu_groups g on g.node_id = a.node_id and g.group_no = a.group_no and g.free >= a.cnt),`
      : sql`fits (ok) as (select true),`;
  // The slots a group gives: its first `cnt` empty ones (array_positions lists them in order).
  const picked = sql`(array_positions(g.holders, null))[1:a.cnt]`;
  const result = await sql<
    BoundGroup & {
      seq: ReservationRow['seq'] | null;
      groups_wanted: number;
      node_ids: string | null;
      fits: boolean;
      picked_node: string | null;
    }
  >`
    with ${'pick' in source ? sql`${source.pick},` : sql``}
    a (node_id, group_no, cnt) as (${rows}),
    ${fitsCte}
    ${insertCte}
    per_node as (select node_id, sum(cnt)::int as cnt from a group by node_id),
    nodes_done as (
      update compute.nodes n set free_gpus = n.free_gpus - per_node.cnt
      from per_node where n.id = per_node.node_id and (select ok from fits)
      returning n.id),
    claimed as (
      update compute.gpu_groups g
      set free = g.free - a.cnt,
        holders = array(
          select case when i = any(${picked}) then ${reservation.id}::text else g.holders[i] end
          from generate_subscripts(g.holders, 1) i order by i)
      from a where g.node_id = a.node_id and g.group_no = a.group_no and g.free >= a.cnt and (select ok from fits)
      returning g.node_id, g.group_no, g.model, g.product, g.nvlink_domain,
        array(select g.gpu_indices[i] from generate_subscripts(g.holders, 1) i
              where g.holders[i] = ${reservation.id}::text order by i) as gpu_indices),
    bound as (
      insert into compute.gpu_bindings (reservation_id, tenant_id, pool_id, node_id, group_no, gpu_indices, gpu_count,
        model, product, nvlink_domain, bound_at)
      select ${reservation.id}, ${reservation.tenant_id}, ${reservation.pool_id}, c.node_id, c.group_no,
        c.gpu_indices, cardinality(c.gpu_indices), c.model, c.product, c.nvlink_domain, ${now}::timestamptz
      from claimed c order by c.node_id collate "C", c.group_no
      returning node_id, group_no, gpu_indices, model, product, nvlink_domain)
    select b.*, ${insert ? sql`(select r.seq from r)` : sql`null::bigint`} as seq,
      (select count(*) from a)::int as groups_wanted, (select string_agg(node_id, ', ') from a) as node_ids,
      (select ok from fits) as fits,
      ${'pick' in source ? sql`(select p.id from pick p)` : sql`null::text`} as picked_node
    from (select 1) as one left join bound b on true
    order by b.node_id collate "C", b.group_no`.execute(db);
  // One row even when nothing was bound (node_id null then), so a shortfall is told from "nothing to bind".
  const { groups_wanted: groupsWanted, node_ids: nodeIds, fits, picked_node: pickedNode } = result.rows[0]!;
  const bound = result.rows.filter((b) => b.node_id !== null);
  if (groupsWanted === 0) return { bindings: [], row: undefined, pickedNode, stale: false };
  if (!fits) return { bindings: [], row: undefined, pickedNode, stale: true };
  const wanted =
    'allocations' in source ? source.allocations.reduce((sum, a) => sum + a.count, 0) : source.gpus;
  const claimedGpus = bound.reduce((sum, b) => sum + b.gpu_indices.length, 0);
  if (bound.length !== groupsWanted || claimedGpus !== wanted) {
    throw new ComputeError('INTERNAL', `nodes ${nodeIds} have fewer free GPUs than their counters say`);
  }
  const bindings = bound.map(
    ({ seq: _seq, groups_wanted: _wanted, node_ids: _ids, fits: _fits, picked_node: _picked, ...b }) => b,
  );
  const seq = bound[0]?.seq;
  const row: ReservationRow | undefined =
    insert && seq !== undefined && seq !== null
      ? { ...insert, seq, ended_at: null, end_reason: null }
      : undefined;
  return { bindings, row, pickedNode, stale: false };
}

/**
 * Binds the allocation's GPUs to the reservation: nodes locked in id order and checked ready, then
 * one statement for the writes (writeBinding). False when a node stopped being ready or its groups
 * changed since placement (the caller places again).
 */
async function bind(
  db: FleetDb,
  reservation: { id: string; tenant_id: string; pool_id: string },
  allocations: Allocation[],
  now: Date,
): Promise<BoundGroup[] | false> {
  const perNode = new Map<string, number>();
  for (const a of allocations) perNode.set(a.nodeId, (perNode.get(a.nodeId) ?? 0) + a.count);
  const nodeIds = [...perNode.keys()].sort();
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
  const written = await writeBinding(db, reservation, { allocations }, now);
  return written.stale ? false : written.bindings;
}

/** Places and binds, placing again if a node changed state in between. */
async function placeAndBind(
  db: FleetDb,
  reservation: ReservationRow,
  now: Date,
): Promise<BoundGroup[] | false> {
  const terms = requestTerms({
    selector: reservation.selector,
    gpuModel: reservation.gpu_model,
    gpuProduct: reservation.gpu_product,
  });
  const request = requestOf(reservation);
  for (let attempt = 0; attempt < 5; attempt++) {
    const allocations = await findPlacement(db, request, terms);
    if (!allocations) return false;
    const bound = await bind(db, reservation, allocations, now);
    if (bound) return bound;
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

/** Marks a bound reservation active and tells; `bound` is what its bind returned (on ready nodes). */
async function activate(
  db: FleetDb,
  row: ReservationRow,
  now: Date,
  emit: Emit,
  bound: readonly BoundGroup[],
): Promise<{ row: ReservationRow; binding: BindingView[] }> {
  const endsAt = new Date(now.getTime() + row.duration_seconds * 1000);
  const updated = await db
    .updateTable('compute.reservations')
    .set({ state: 'active', activated_at: now, ends_at: endsAt, version: row.version + 1 })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  const binding = boundViews(bound, 'ready');
  emitActivated(row, endsAt, binding, updated.version, emit);
  return { row: updated, binding };
}

function emitActivated(
  row: ReservationRow,
  endsAt: Date,
  binding: readonly BindingView[],
  version: number,
  emit: Emit,
): void {
  emit({
    type: 'reservation.activated',
    tenantId: row.tenant_id,
    subject: { type: 'reservation', id: row.id },
    data: {
      state: 'active',
      poolId: row.pool_id,
      gpus: row.gpus,
      endsAt: iso(endsAt),
      binding: binding.map(({ nodeState: _s, ...b }) => b),
      version,
    },
  });
}

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
async function quotaAllows(
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
async function queueHeadStart(db: FleetDb, poolId: string, now: Date): Promise<number | null> {
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

/**
 * Gives a reservation's GPUs back and ends it, then completes drains it finished. The pool must be
 * locked, or nothing queued in it; when the reservation holds GPUs on more than one node, the caller
 * has locked them in id order (lockNodesOf). Returns the ended row and its binding view.
 */
async function endReservation(
  db: FleetDb,
  row: ReservationRow,
  reason: EndReason,
  now: Date,
  emit: Emit,
): Promise<{ row: ReservationRow; binding: BindingView[] }> {
  const ended = await endWhere(db, row.id, null, reason, now, emit, row.state);
  if (!ended) throw notFound('reservation', row.id);
  return ended;
}

/** The event each end reason is recorded as. */
const EVENT_OF_END: Record<EndReason, string> = {
  released: 'reservation.released',
  expired: 'reservation.expired',
  cancelled: 'reservation.cancelled',
  'node-retired': 'reservation.ended',
};

/**
 * The statement that ends a reservation (raw SQL: data-modifying CTEs have no Kysely builder): its
 * bindings released, its GPUs' slots emptied and the counts given back (each node's row before its
 * groups', as everywhere), its row ended. With a `guard` over its row (as `r`), the row is locked
 * first and nothing happens unless the guard holds on its newest version: undefined then.
 */
async function endWhere(
  db: FleetDb,
  id: string,
  guard: RawBuilder<boolean> | null,
  reason: EndReason,
  now: Date,
  emit: Emit,
  previousState: ReservationRow['state'],
): Promise<{ row: ReservationRow; binding: BindingView[] } | undefined> {
  const target = guard
    ? sql`select r.id from compute.reservations r where r.id = ${id} and ${guard} for update of r`
    : sql`select ${id}::text as id`;
  const result = await sql<
    ReservationRow & {
      released: (BoundGroup & { state: string | null })[] | string;
      draining: string[] | null;
      settling: string[] | null;
    }
  >`
    with target as (${target}),
    released as (
      update compute.gpu_bindings set released_at = ${now}::timestamptz
      where reservation_id in (select id from target) and released_at is null
      returning node_id, group_no, gpu_indices, gpu_count, model, product, nvlink_domain),
    per_node as (select node_id, sum(gpu_count)::int as cnt from released group by node_id),
    nodes_done as (
      update compute.nodes n set free_gpus = n.free_gpus + per_node.cnt
      from per_node where n.id = per_node.node_id
      returning n.id, n.state,
        n.reported_revision > n.inventory_revision and n.free_gpus = n.gpu_count as settles),
    groups_done as (
      update compute.gpu_groups g
      set free = g.free + r.gpu_count, holders = array_replace(g.holders, ${id}::text, null)
      from released r join nodes_done d on d.id = r.node_id
      where g.node_id = r.node_id and g.group_no = r.group_no),
    ended as (
      update compute.reservations
      set state = 'ended', ended_at = ${now}::timestamptz, end_reason = ${reason}, version = version + 1
      where id in (select id from target)
      returning *)
    select e.*,
      (select coalesce(jsonb_agg(jsonb_build_object('node_id', b.node_id, 'group_no', b.group_no,
          'gpu_indices', b.gpu_indices, 'model', b.model, 'product', b.product, 'nvlink_domain', b.nvlink_domain,
          'state', d.state)), '[]'::jsonb)
        from released b left join nodes_done d on d.id = b.node_id) as released,
      (select array_agg(d.id order by d.id) from nodes_done d where d.state = 'draining') as draining,
      (select array_agg(d.id order by d.id) from nodes_done d where d.settles) as settling
    from ended e`.execute(db);
  const first = result.rows[0];
  if (!first) return undefined;
  const { released: raw, draining, settling, ...updated } = first;
  const released = (typeof raw === 'string' ? JSON.parse(raw) : raw) as (BoundGroup & {
    state: string | null;
  })[];
  // The event names how it ended: a queued reservation withdrawn, by its tenant or because its
  // pool can no longer serve it, was cancelled, not released (it held nothing).
  const type = EVENT_OF_END[reason];
  emit({
    type,
    tenantId: updated.tenant_id,
    subject: { type: 'reservation', id },
    data: {
      state: 'ended',
      endReason: reason,
      previousState,
      poolId: updated.pool_id,
      version: updated.version,
    },
  });
  await completeDrains(db, draining ?? [], now, emit);
  // A reported inventory that waited for its node to hold nothing is put in use now, not at the
  // node's next heartbeat (its row is locked by this statement).
  for (const nodeId of settling ?? []) await settleInventory(db, nodeId, now, emit);
  return { row: updated, binding: boundViews(released, null) };
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

/** The reservations holding GPUs on a node, in id order: read from its groups' slots, whatever its history. */
export async function reservationsOnNode(
  db: FleetDb,
  nodeId: string,
): Promise<{ id: string; tenant_id: string }[]> {
  const rows = await sql<{ id: string; tenant_id: string }>`
    select r.id, r.tenant_id from compute.reservations r
    where r.id in ${holdersOf(nodeId)}
    order by r.id`.execute(db);
  return rows.rows;
}

/** The ids in a node's GPU slots, as a subquery. */
const holdersOf = (nodeId: string) =>
  sql<string>`(select h.id from compute.gpu_groups g, unnest(g.holders) as h(id) where g.node_id = ${nodeId})`;

/** Ends every reservation bound to a node (it is being retired). The pool must be locked, the node not yet. */
export async function endReservationsOnNode(
  db: FleetDb,
  nodeId: string,
  now: Date,
  emit: Emit,
): Promise<void> {
  const rows = await db
    .selectFrom('compute.reservations')
    .selectAll()
    .where('id', 'in', holdersOf(nodeId))
    .orderBy('seq')
    .forUpdate()
    .execute();
  if (rows.length === 0) return;
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
      'b.group_no',
      'b.gpu_indices',
      'b.nvlink_domain',
      'b.model',
      'b.product',
      'n.state',
    ])
    .where('b.reservation_id', 'in', ids)
    .orderBy('b.reservation_id')
    .orderBy('b.node_id')
    .orderBy('b.group_no')
    .execute();
  for (const r of rows) {
    const list = map.get(r.reservation_id) ?? [];
    addBinding(list, r);
    map.set(r.reservation_id, list);
  }
  return map;
}

/** Adds one group's bound GPUs to a reservation's binding view (one entry per node, its indices ascending). */
function addBinding(
  list: BindingView[],
  r: {
    node_id: string;
    gpu_indices: number[];
    nvlink_domain: string | null;
    model: string;
    product: string;
    state: string | null;
  },
): void {
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
  } else if (entry.nvlinkDomain !== r.nvlink_domain) entry.nvlinkDomain = null;
  entry.gpuIndices.push(...r.gpu_indices);
  entry.gpuIndices.sort((a, b) => a - b);
}

/** The binding view of groups a statement just bound or released, ordered as bindingOf orders them. */
function boundViews(
  bound: readonly (BoundGroup & { state?: string | null })[],
  state: string | null,
): BindingView[] {
  const list: BindingView[] = [];
  const sorted = [...bound].sort((x, y) =>
    x.node_id < y.node_id ? -1 : x.node_id > y.node_id ? 1 : x.group_no - y.group_no,
  );
  for (const b of sorted) addBinding(list, { ...b, state: b.state === undefined ? state : b.state });
  return list;
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
    ownerId: row.owner_id,
    agentId: row.agent_id,
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
    mine?: boolean | undefined;
    limit: number;
    cursor?: string | undefined;
  }>,
) {
  const db = fleetDb(ctx.db);
  let query = db.selectFrom('compute.reservations').selectAll().where('tenant_id', '=', ctx.tenantId);
  if (ctx.input.mine) query = query.where('owner_id', '=', ctx.identity ? ownerOf(ctx.identity) : '');
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
  // The fast pick may lock a node it then skips (its newest version no longer fits) and keep that
  // lock; a miss goes back to this savepoint, which drops it, before the locked path asks for the
  // pool's lock: a node held while waiting for its pool would break the lock order
  // (docs/decisions/transient-conflicts.md). Sent with the pick, it costs no round trip.
  await db.executeQuery(CompiledQuery.raw(sentWithCommit('savepoint fast_reserve'), []));
  const missed = () => sql`rollback to savepoint fast_reserve`.execute(db);
  if (!input.projectId) {
    // The common reserve checks the pool in its one read (see reserveFast); when it does not apply,
    // the checks below run and say why.
    const fast = await reserveFast(ctx, db, input.poolId, terms, ctx.now(), true);
    if (fast) return fast;
    await missed();
  }
  const pool = await reservablePool(db, ctx.tenantId, input.poolId);
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
  await missed();
  await lockPool(db, pool.id);
  const quota = await quotaAllows(db, ctx.tenantId, pool.id, input.gpus);
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
      ...requestedColumns(ctx, pool.id, now),
      state: 'queued',
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
    const bound = await placeAndBind(db, row, now);
    if (bound) {
      const activated = await activate(db, row, now, ctx.emit, bound);
      return reservationView(activated.row, activated.binding, null);
    }
  } else {
    const started = await activateQueue(db, pool.id, now, ctx.emit);
    if (started.includes(row.id)) current = await loadReservation(db, ctx.tenantId, row.id);
  }
  if (current.state === 'queued') {
    const never = (await earliestStartAmongAll(db, input, terms)) === null;
    if (never) {
      throw new ComputeError(
        'INVALID_ARGUMENT',
        `pool ${pool.id} has no ${input.nvlink ? 'NVLink domain' : 'set of nodes'} with ${input.gpus === 1 ? '1 GPU' : `${input.gpus} GPUs`} matching this request`,
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

/** A pool the tenant may reserve from: visible to it (NOT_FOUND), active and a gpu pool. */
async function reservablePool(db: FleetDb, tenantId: string, poolId: string) {
  const { pool } = await visiblePool(db, tenantId, poolId);
  if (pool.state !== 'active')
    throw new ComputeError('INVALID_STATE', `pool ${pool.id} is archived`, {
      details: { state: pool.state },
      hint: 'An archived pool takes no new reservations; better-compute pools list shows the active ones.',
    });
  if (pool.class !== 'gpu')
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `pool ${pool.id} is a ${pool.class} pool; reservations take GPUs from gpu pools`,
      { details: { field: 'poolId' } },
    );
  return pool;
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
  /** Whether the read also checks the pool (visible to the tenant, active, a gpu pool). */
  checkPool = false,
): Promise<ReservationView | undefined> {
  const { input } = ctx;
  if (input.nvlink || terms.some((t) => t.field !== null)) return undefined;
  // The pick: nothing queued in the pool and no quota for the tenant on it (a tenant with a quota
  // takes the locked path, where its holdings are counted consistently), and the best-fitting ready
  // node taken with FOR UPDATE SKIP LOCKED. Its columns are the newest version (read under the
  // lock); the subqueries read the statement's snapshot, which may be older: the node's groups are
  // used only when the node's inventory revision is the same in both, and there is one group
  // (whose free count is then the node's, read under the lock). The GPU count is read through a
  // subquery so the planner estimates the same with or without its value, and the prepared statement
  // keeps one generic plan instead of planning every reserve (docs/decisions/prepared-statements.md).
  const pick = sql`
      select n.id, n.seq, n.free_gpus, n.inventory_revision,
        (select s.inventory_revision from compute.nodes s where s.id = n.id) as seen_revision,
        (select array_agg(g.group_no) from compute.gpu_groups g where g.node_id = n.id) as groups
      from compute.nodes n
      where n.pool_id = ${poolId} and n.state = 'ready' and n.free_gpus >= (select ${input.gpus}::int)
        and ${filterSql(terms, input.tolerations)}
        and not exists (select 1 from compute.reservations q where q.pool_id = ${poolId} and q.state = 'queued')
        and not exists (select 1 from compute.quotas x where x.tenant_id = ${ctx.tenantId} and x.pool_id = ${poolId} and x.limit_value is not null)
        ${
          checkPool
            ? sql`and exists (
                select 1 from compute.pools p
                where p.id = ${poolId} and p.state = 'active' and p.class = 'gpu'
                  and (p.tenant_id = ${ctx.tenantId} or exists (
                    select 1 from compute.pool_offers o where o.pool_id = p.id and o.tenant_id = ${ctx.tenantId})))`
            : sql``
        }
      order by n.free_gpus, n.seq
      limit 1
      for update of n skip locked`;
  const endsAt = new Date(now.getTime() + input.durationSeconds * 1000);
  const insert: NewReservation = {
    ...requestedColumns(ctx, poolId, now),
    state: 'active',
    activated_at: now,
    ends_at: endsAt,
    // Created (version 1) and activated (version 2) by one statement; both events are told.
    version: 2,
  };
  // The common node, one GPU group, is picked and bound by one statement: one round trip fewer, and
  // the node's lock is held from the pick to the commit without a round trip in between. A node of
  // several groups writes nothing there but stays locked, and the statement says which node it
  // picked: its groups are then placed. No node picked: the locked path decides.
  let written = await writeBinding(
    db,
    insert,
    {
      pick: sql`pick as (${pick})`,
      rows: sql`select p.id, p.groups[1], (select ${input.gpus}::int) from pick p
        where cardinality(p.groups) = 1 and p.seen_revision = p.inventory_revision`,
      gpus: input.gpus,
    },
    now,
    insert,
  );
  if (!written.row) {
    if (!written.pickedNode) return undefined;
    const groups = await groupsQuery(db, poolId, filterSql(terms, input.tolerations))
      .where('g.node_id', '=', written.pickedNode)
      .orderBy('g.group_no')
      .execute();
    const allocations = place(toFree(groups), input.gpus, false);
    if (!allocations) return undefined;
    written = await writeBinding(db, insert, { allocations }, now, insert);
  }
  const { bindings, row } = written;
  if (!row) throw new ComputeError('INTERNAL', `reservation ${insert.id} was not written`);
  ctx.emit({
    type: 'reservation.created',
    subject: { type: 'reservation', id: row.id },
    data: {
      state: 'queued',
      poolId,
      gpus: row.gpus,
      durationSeconds: row.duration_seconds,
      nvlink: row.nvlink,
      version: 1,
    },
  });
  const binding = boundViews(bindings, 'ready');
  emitActivated(row, endsAt, binding, row.version, ctx.emit);
  return reservationView(row, binding, null);
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
  // A pool no longer offered to the tenant lets its running reservations run to their end, and
  // no further; an owner always sees its pool.
  await visiblePool(db, ctx.tenantId, row.pool_id).catch((error: unknown) => {
    if (!(error instanceof ComputeError) || error.code !== 'NOT_FOUND') throw error;
    throw new ComputeError('INVALID_STATE', `pool ${row.pool_id} is no longer offered to ${ctx.tenantId}`, {
      details: { poolId: row.pool_id },
      hint: 'Its running reservations run to their end; ask the pool’s owner to offer it again for more time.',
    });
  });
  // Expiry is at the end time, whenever the controller gets to it: past it, nothing extends.
  if (row.state === 'active' && row.ends_at && new Date(row.ends_at) <= ctx.now()) {
    throw new ComputeError('INVALID_STATE', `reservation ${row.id} reached its end at ${iso(row.ends_at)}`, {
      details: { state: row.state, endsAt: iso(row.ends_at) },
      hint: 'A reservation is extended before its end time; reserve again for more time.',
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
  const { reservationId, ifVersion } = ctx.input;
  const now = ctx.now();
  // The common case in one statement: an active reservation of the caller's tenant at the version
  // asked for, on one node, in a pool where nothing is queued (so neither the pool's lock nor the
  // queue is needed); the statement locks its row and ends it. Anything else takes the path below,
  // which says why or does the rest.
  const released = await endWhere(
    db,
    reservationId,
    sql<boolean>`r.tenant_id = ${ctx.tenantId} and r.state = 'active' and r.ends_at > ${now}::timestamptz
      and ${ifVersion === undefined ? sql`true` : sql`r.version = ${ifVersion}`}
      and not exists (select 1 from compute.reservations q where q.pool_id = r.pool_id and q.state = 'queued')
      and (select count(distinct b.node_id) from compute.gpu_bindings b
           where b.reservation_id = r.id and b.released_at is null) <= 1`,
    'released',
    now,
    ctx.emit,
    'active',
  );
  if (released) return reservationView(released.row, released.binding, null);
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
  if (row.state === 'active') await lockNodesOf(db, [row.id]);
  // Past its end time it has expired, whether or not the controller has got to it yet: it ends so,
  // at that time, as the controller would have ended it.
  const endsAt = row.ends_at ? new Date(row.ends_at) : null;
  const expired = row.state === 'active' && endsAt !== null && endsAt <= now;
  const ended = await endReservation(
    db,
    row,
    row.state === 'queued' ? 'cancelled' : expired ? 'expired' : 'released',
    expired ? endsAt : now,
    ctx.emit,
  );
  if (queued) await activateQueue(db, row.pool_id, now, ctx.emit);
  return reservationView(ended.row, ended.binding, null);
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
  // Each ends at its end time, not when this pass ran: what it held and used stops there.
  for (const row of due) await endReservation(db, row, 'expired', new Date(row.ends_at!), emit);
  await activateQueue(db, poolId, now, emit);
  return due.length;
}

// ---------------------------------------------------------------------------------------------
// Capacity

export async function getCapacity(ctx: CallContext<{ poolId?: string | undefined }>) {
  const db = fleetDb(ctx.db);
  // One statement (raw SQL: Kysely has no builder for the nested aggregate): the pools the tenant
  // owns or is offered, one pass over their groups' counters (one narrow row per node and product,
  // carrying the node's state: never the GPUs or reservations) and their queues.
  const poolFilter = ctx.input.poolId ? sql`and p.id = ${ctx.input.poolId}` : sql``;
  // GPUs count as free where a request could be placed now. An archived pool takes no new work,
  // nor does a node whose reported inventory waits to be put in use (it carries compute's
  // inventory-pending taint, which nothing tolerates), so their free GPUs count as unavailable.
  // Those nodes are few: `waiting` finds them by a partial index and holds them in one array (a
  // join with them cost a hash of every group, +50 % on this statement). A node its operator
  // tainted keeps its free GPUs free: a request that tolerates the taint may use them. An archived
  // pool is listed while it still has GPUs (running reservations run to their end there), and
  // always when asked for.
  const archivedShown = ctx.input.poolId
    ? sql`true`
    : sql`exists (select 1 from compute.gpu_groups a where a.pool_id = p.id and a.node_state <> 'retired')`;
  const rows = (
    await sql<{
      id: string;
      name: string;
      class: string;
      models:
        { gpuModel: string; total: number; reserved: number; free: number; unavailable: number }[] | string;
      queued_n: number;
      queued_gpus: number;
    }>`
      with p as (
        select p.id, p.name, p.class, p.state = 'active' as active from compute.pools p
        where (p.state = 'active' or ${archivedShown})
          and (p.tenant_id = ${ctx.tenantId}
               or p.id in (select o.pool_id from compute.pool_offers o where o.tenant_id = ${ctx.tenantId}))
          ${poolFilter}),
      waiting as (
        select coalesce(array_agg(n.id), '{}') as ids from compute.nodes n
        where n.reported_revision <> n.inventory_revision and n.pool_id in (select id from p)),
      c as (
        select g.pool_id, g.model,
          sum(g.total)::int as total,
          sum(g.total - g.free)::int as reserved,
          coalesce(sum(g.free) filter (where g.node_state = 'ready' and p.active and g.node_id <> all(w.ids)), 0)::int as free,
          coalesce(sum(g.free) filter (where g.node_state <> 'ready' or not p.active or g.node_id = any(w.ids)), 0)::int
            as unavailable
        from compute.gpu_groups g join p on p.id = g.pool_id cross join waiting w
        where g.node_state <> 'retired'
        group by g.pool_id, g.model),
      q as (
        select pool_id, count(*)::int as n, coalesce(sum(gpus), 0)::int as gpus
        from compute.reservations
        where pool_id in (select id from p) and state = 'queued'
        group by pool_id)
      select p.id, p.name, p.class,
        (select coalesce(jsonb_agg(jsonb_build_object('gpuModel', c.model, 'total', c.total,
            'reserved', c.reserved, 'free', c.free, 'unavailable', c.unavailable) order by c.model), '[]'::jsonb)
         from c where c.pool_id = p.id) as models,
        coalesce(q.n, 0) as queued_n, coalesce(q.gpus, 0) as queued_gpus
      from p left join q on q.pool_id = p.id
      order by p.id`.execute(db)
  ).rows;
  if (ctx.input.poolId && rows.length === 0) throw notFound('pool', ctx.input.poolId);
  return {
    items: rows.map((pool) => {
      const models = (typeof pool.models === 'string' ? JSON.parse(pool.models) : pool.models) as {
        gpuModel: string;
        total: number;
        reserved: number;
        free: number;
        unavailable: number;
      }[];
      const sum = (key: 'total' | 'reserved' | 'free' | 'unavailable') =>
        models.reduce((s, m) => s + m[key], 0);
      return {
        poolId: pool.id,
        name: pool.name,
        class: pool.class,
        total: sum('total'),
        reserved: sum('reserved'),
        free: sum('free'),
        unavailable: sum('unavailable'),
        queuedReservations: Number(pool.queued_n),
        queuedGpus: Number(pool.queued_gpus),
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
  const pool = await reservablePool(db, ctx.tenantId, input.poolId);
  const now = ctx.now();
  const queued = await db
    .selectFrom('compute.reservations')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('pool_id', '=', pool.id)
    .where('state', '=', 'queued')
    .executeTakeFirstOrThrow();
  const allocations = await findPlacement(db, input, terms);
  // With a queue, a reserve that fits starts now only if it ends by the head's start (EASY
  // backfill, as activateQueue decides); otherwise it queues behind them, and it cannot start
  // before the head does.
  const headStart = queued.n > 0 && allocations ? await queueHeadStart(db, pool.id, now) : null;
  if (headStart !== null && now.getTime() + input.durationSeconds * 1000 > headStart) {
    return {
      fits: false,
      placement: null,
      earliestStartAt: iso(new Date(headStart)),
      queuedAhead: queued.n,
      reason: `${queued.n} reservation(s) are queued ahead and the first can start at ${iso(new Date(headStart))}; this request would run past that, so it queues behind them and starts no earlier (a request that ends by then starts now)`,
    };
  }
  if (allocations) {
    const groups = await db
      .selectFrom('compute.gpu_groups')
      .select(['node_id', 'group_no', 'model', 'product', 'nvlink_domain', 'gpu_indices', 'holders'])
      .where('node_id', 'in', [...new Set(allocations.map((a) => a.nodeId))])
      .execute();
    // The GPUs a reserve would take: each group's first empty slots, as writeBinding picks them.
    const chosen = allocations.map((a) => {
      const group = groups.find((g) => g.node_id === a.nodeId && g.group_no === a.groupNo)!;
      return {
        ...group,
        gpu_indices: group.gpu_indices.filter((_, i) => group.holders[i] === null).slice(0, a.count),
      };
    });
    const placement = boundViews(chosen, 'ready').map(({ nodeState: _state, ...view }) => view);
    return {
      fits: true,
      placement,
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
        ? `the pool has no ${input.nvlink ? 'NVLink domain' : 'set of nodes'} with ${input.gpus} matching GPU${input.gpus === 1 ? '' : 's'}`
        : at
          ? 'not enough matching GPUs are free now; the earliest start counts only reservations running now, not the queue'
          : 'the matching GPUs are on nodes that take no new work now (cordoned, draining, offline)',
  };
}

/**
 * The owner of a reservation, for IAM's `@own` patterns on extend and release: read before the
 * call is decided; null for one that does not exist (the method then answers NOT_FOUND) or has none.
 */
export async function reservationOwner(
  db: Kysely<ComputeTables>,
  tenantId: string,
  input: { reservationId: string },
): Promise<string | null> {
  const row = await fleetDb(db)
    .selectFrom('compute.reservations')
    .select('owner_id')
    .where('id', '=', input.reservationId)
    .where('tenant_id', '=', tenantId)
    .executeTakeFirst();
  return row?.owner_id ?? null;
}
