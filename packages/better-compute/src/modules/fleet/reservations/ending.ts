/**
 * Ending reservations: released, expired, cancelled, or ended with their node; the GPUs go back and
 * drains they finish complete. Lock order: locks.ts.
 */
import { type RawBuilder, sql } from 'kysely';
import { notFound } from '../common.js';
import { lockNodesOf } from '../locks.js';
import { type Emit, completeDrains, settleInventory } from '../node-states.js';
import type { EndReason, FleetDb } from '../tables.js';
import type { BoundGroup, ReservationRow } from './views.js';
import { type BindingView, boundViews } from './views.js';

/**
 * Gives a reservation's GPUs back and ends it, then completes drains it finished. The pool must be
 * locked, or nothing queued in it; when the reservation holds GPUs on more than one node, the caller
 * has locked them in id order (lockNodesOf). Returns the ended row and its binding view.
 */
export async function endReservation(
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
const EVENT_OF_END: Record<
  EndReason,
  'reservation.released' | 'reservation.expired' | 'reservation.cancelled' | 'reservation.ended'
> = {
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
export async function endWhere(
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
