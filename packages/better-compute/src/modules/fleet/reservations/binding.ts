/**
 * Binding a placed reservation to its GPUs: the reservation's row, its binding rows and the GPU
 * slots it claims, written in one statement; and activation of a queued reservation. Lock order:
 * locks.ts.
 */
import { ComputeError, newId, ownerOf } from '@better-compute/core';
import { type RawBuilder, sql } from 'kysely';
import type { CallContext } from '../../define-module.js';
import { isoOrNull } from '../common.js';
import type { Emit } from '../node-states.js';
import type { FleetDb } from '../tables.js';
import { type PlacementRequest, findPlacement } from './placement-sql.js';
import type { Allocation } from './placement.js';
import { requestTerms } from './selector.js';
import { type BindingView, type BoundGroup, boundViews, type ReservationRow } from './views.js';

/** Reservation columns to insert: a reserve that binds in the same statement inserts its row active. */
export type NewReservation = {
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
  /** Null for the hold of an instance's GPUs, which lasts as long as the instance. */
  ends_at: Date | null;
  instance_id: string | null;
  version: number;
};

/** The columns of a new reservation that come from the request, whether it queues or binds at once. */
export function requestedColumns(
  ctx: CallContext<PlacementRequest & { projectId?: string | undefined }>,
  poolId: string,
  now: Date,
  /** The instance whose GPUs the reservation holds (modules/vps), if it is one's. */
  instanceId: string | null = null,
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
    instance_id: instanceId,
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
export async function writeBinding(
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
          selector, gpu_model, gpu_product, tolerations, created_at, activated_at, ends_at, version, owner_id, agent_id,
          instance_id)
        select ${insert.id}, ${insert.tenant_id}, ${insert.pool_id}, ${insert.project_id}, ${insert.state},
          ${insert.gpus}::int, ${insert.duration_seconds}::int, ${insert.nvlink}::boolean, ${insert.selector}::text,
          ${insert.gpu_model}::text, ${insert.gpu_product}::text, ${sql.val(insert.tolerations)}::text[],
          ${insert.created_at}::timestamptz, ${insert.activated_at}::timestamptz,
          ${insert.ends_at}::timestamptz, ${insert.version}::int, ${insert.owner_id}::text, ${insert.agent_id}::text,
          ${insert.instance_id}::text
        where exists (select 1 from a) and (select ok from fits)
        returning seq),`
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
export async function placeAndBind(
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

export function requestOf(row: ReservationRow): PlacementRequest {
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
export async function activate(
  db: FleetDb,
  row: ReservationRow,
  now: Date,
  emit: Emit,
  bound: readonly BoundGroup[],
): Promise<{ row: ReservationRow; binding: BindingView[] }> {
  // The hold of an instance's GPUs has no end: it lasts as long as the instance.
  const endsAt = row.instance_id ? null : new Date(now.getTime() + row.duration_seconds * 1000);
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

export function emitActivated(
  row: ReservationRow,
  endsAt: Date | null,
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
      endsAt: isoOrNull(endsAt),
      binding: binding.map(({ nodeState: _s, ...b }) => b),
      version,
    },
  });
}
