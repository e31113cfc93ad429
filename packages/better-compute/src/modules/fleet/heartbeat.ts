/**
 * `nodes.heartbeat`: a node daemon reports with its node credential (`node_….SECRET`, stored hashed,
 * checked in constant time); its inventory, when changed, is recorded and settled. See
 * docs/decisions/fleet-joining.md.
 */
import { ComputeError, canonicalJson } from '@better-compute/core';
import { sql } from 'kysely';
import type { CallContext } from '../define-module.js';
import { iso, secretMatches, splitToken } from './common.js';
import { lockPool } from './locks.js';
import { completeDrains, setNodeState, settleInventory } from './node-states.js';
import { HEARTBEAT_INTERVAL_SECONDS, OFFLINE_AFTER_SECONDS } from './nodes.js';
import { reservationsOnNode } from './reservations/ending.js';
import { activateQueue } from './reservations/queue.js';
import { type StoredInventory, fleetDb } from './tables.js';

const inventoriesEqual = (a: StoredInventory, b: StoredInventory) => canonicalJson(a) === canonicalJson(b);

/** The public heartbeat: proves the node credential, brings the node up, records inventory changes. */
export async function heartbeat(
  ctx: CallContext<{ nodeCredential: string; inventory?: StoredInventory | undefined }>,
) {
  const db = fleetDb(ctx.db);
  const parts = splitToken(ctx.input.nodeCredential, 'node');
  const unknown = () =>
    new ComputeError('UNAUTHENTICATED', 'the node credential is unknown or revoked', {
      hint: 'A node credential is issued once and cleared when its node is retired: join the machine again with a new join token (better-compute join-tokens create).',
    });
  if (!parts) throw unknown();
  const peek = await db.selectFrom('compute.nodes').selectAll().where('id', '=', parts.id).executeTakeFirst();
  const matches = secretMatches(parts.secret, peek?.credential_hash ?? null);
  if (!peek || !matches) throw unknown();
  // A heartbeat that may change the node or start queued work takes the pool's lock before the
  // node's, like every other change (see locks.ts); a plain one only stamps the time.
  const changes =
    peek.state === 'joining' ||
    peek.state === 'offline' ||
    ctx.input.inventory !== undefined ||
    peek.reported_revision > peek.inventory_revision;
  if (changes) await lockPool(db, peek.pool_id);
  const node = changes
    ? await db
        .selectFrom('compute.nodes')
        .selectAll()
        .where('id', '=', peek.id)
        .forUpdate()
        .executeTakeFirstOrThrow()
    : peek;
  if (!secretMatches(parts.secret, node.credential_hash)) throw unknown();
  const now = ctx.now();
  const emit = (event: Parameters<typeof ctx.emit>[0]) => ctx.emit({ tenantId: node.tenant_id, ...event });
  await db.updateTable('compute.nodes').set({ last_heartbeat_at: now }).where('id', '=', node.id).execute();
  let freed = false;
  if (node.state === 'joining') {
    await setNodeState(db, node, 'ready', now, emit);
    freed = true;
  } else if (node.state === 'offline') {
    const back = node.state_before_offline ?? 'ready';
    await setNodeState(db, node, back, now, emit, { stateBeforeOffline: null, eventType: 'node.online' });
    for (const r of await reservationsOnNode(db, node.id))
      ctx.emit({
        tenantId: r.tenant_id,
        type: 'reservation.recovered',
        subject: { type: 'reservation', id: r.id },
        data: { nodeId: node.id },
      });
    // A node that was draining may have lost its last reservation while it was away; the answer
    // tells the state after this call.
    if (back === 'draining' && (await completeDrains(db, [node.id], now, emit)).length > 0)
      node.state = 'drained';
    freed = back === 'ready';
  }
  if (ctx.input.inventory) {
    const latest = await db
      .selectFrom('compute.node_inventories')
      .select(['revision', 'inventory'])
      .where('node_id', '=', node.id)
      .orderBy('revision', 'desc')
      .limit(1)
      .executeTakeFirstOrThrow();
    if (!inventoriesEqual(latest.inventory, ctx.input.inventory)) {
      const revision = latest.revision + 1;
      await db
        .insertInto('compute.node_inventories')
        .values({
          node_id: node.id,
          revision,
          inventory: JSON.stringify(ctx.input.inventory),
          recorded_at: now,
        })
        .execute();
      await db
        .updateTable('compute.nodes')
        .set({ reported_revision: revision })
        .where('id', '=', node.id)
        .execute();
      node.reported_revision = revision;
      emit({ type: 'node.inventory.changed', subject: { type: 'node', id: node.id }, data: { revision } });
    }
  }
  // Put in use now if that is safe, else the node is tainted until it is (node-states.ts).
  if (node.reported_revision > node.inventory_revision)
    freed = (await settleInventory(db, node.id, now, emit)) || freed;
  if (freed) await activateQueue(db, node.pool_id, now, ctx.emit);
  // What runs on the node: its groups' slots (migration 0003), with each holder's end time.
  const bindings = (
    await sql<{ reservation_id: string; gpu_index: number; ends_at: Date | null }>`
      select h.reservation_id, h.gpu_index, r.ends_at
      from compute.gpu_groups g
      cross join unnest(g.holders, g.gpu_indices) as h(reservation_id, gpu_index)
      join compute.reservations r on r.id = h.reservation_id
      where g.node_id = ${node.id}
      order by h.reservation_id, h.gpu_index`.execute(db)
  ).rows;
  const byReservation = new Map<string, { reservationId: string; gpuIndices: number[]; endsAt: string }>();
  for (const b of bindings) {
    const entry = byReservation.get(b.reservation_id) ?? {
      reservationId: b.reservation_id,
      gpuIndices: [],
      endsAt: iso(b.ends_at ?? now),
    };
    entry.gpuIndices.push(b.gpu_index);
    byReservation.set(b.reservation_id, entry);
  }
  return {
    nodeId: node.id,
    state: node.state,
    heartbeatIntervalSeconds: HEARTBEAT_INTERVAL_SECONDS,
    offlineAfterSeconds: OFFLINE_AFTER_SECONDS,
    bindings: [...byReservation.values()],
  };
}
