/**
 * The fleet's lock order, stated once; every transaction that takes more than one of these locks
 * takes them in this order, so waits cannot form a cycle:
 *
 *   pool row → reservation rows → node rows (id order) → GPU group rows
 *
 * Placement that may queue (and every activation, expiry and node change) runs under the pool's row
 * lock (`lockPool`, FOR NO KEY UPDATE), so the queue, quotas and best fit read one consistent
 * picture. Two hot paths skip it: a reserve that needs one node and finds one (reservations/reserve.ts
 * `reserveFast`: the node taken with FOR UPDATE SKIP LOCKED), and a release while nothing is queued
 * (reservations/extend-release.ts: its reservation row, then its nodes in id order, `lockNodesOf`).
 * Whatever holds node rows takes them in id order before waiting for another, and binding GPUs never
 * waits for a node (SKIP LOCKED). A fast pick that misses rolls back to the savepoint set with the
 * pick before it asks for the pool, dropping the lock of a node it rechecked and skipped; a
 * transaction PostgreSQL still aborts as a deadlock's victim runs again (docs/decisions/
 * transient-conflicts.md). A node's state is checked again under its row lock when GPUs are bound,
 * so a node cordoned, drained or gone offline concurrently never receives new work. Who holds a GPU
 * is its slot in the group's row (`holders`): a slot is claimed only while empty, under that row's
 * lock, so no GPU is ever held twice.
 */
import type { FleetDb } from './tables.js';

/** Takes the pool's lock: reserves, releases and activations on one pool run one at a time. */
export async function lockPool(db: FleetDb, poolId: string): Promise<void> {
  await db.selectFrom('compute.pools').select('id').where('id', '=', poolId).forNoKeyUpdate().execute();
}

/** Locks, in id order, every node the given reservations hold GPUs on: before ending several at once. */
export async function lockNodesOf(db: FleetDb, reservationIds: readonly string[]): Promise<void> {
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
