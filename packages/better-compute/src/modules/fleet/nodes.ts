/**
 * Nodes: reading them, operators' state changes (cordon, uncordon, drain, retire, delete), labels
 * and taints, and the node's GPU tables (one row per GPU for its inventory, one per group of GPUs
 * sharing a product and an NVLink domain on a node, with the free count placement reads and a slot
 * per GPU naming the reservation that holds it).
 */
import { listEvents } from '../events/service.js';
import { canonicalJson, ComputeError } from '@better-compute/core';
import { MAX_TAINTS } from '@better-compute/core/methods';
import { type Selectable, sql } from 'kysely';
import type { CallContext } from '../define-module.js';
import { activateQueue } from './reservations/queue.js';
import { endReservationsOnNode } from './reservations/ending.js';
import { lockPool } from './locks.js';
import { ownedPool } from './pools.js';
import {
  checkVersion,
  invalidState,
  iso,
  isoOrNull,
  nextLabels,
  notFound,
  pageOfRows,
  refuseSetAndRemoved,
  sameLabels,
} from './common.js';
import {
  completeDrains,
  type Emit,
  INVENTORY_PENDING,
  setNodeState,
  SITE_AGENT_TAINT,
  sortedTaints,
  SYSTEM_TAINT_PREFIX,
  taintColumns,
  writeGpus,
} from './node-states.js';
import {
  type FleetDb,
  fleetDb,
  type NodesTable,
  type NodeRole,
  type NodeState,
  type StoredInventory,
  type Taint,
} from './tables.js';

export type NodeRow = Selectable<NodesTable>;

/** How often a node daemon heartbeats, and after how long without one it is offline. */
export const HEARTBEAT_INTERVAL_SECONDS = 15;
export const OFFLINE_AFTER_SECONDS = 60;

interface GpuRow {
  node_id: string;
  idx: number;
  model: string;
  product: string;
  vram_gib: number;
  nvlink_domain: string | null;
  reservation_id: string | null;
}

function nodeView(row: NodeRow, gpus: GpuRow[]) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    poolId: row.pool_id,
    name: row.name,
    state: row.state,
    role: row.role,
    stateWhenBack: row.state === 'offline' ? (row.state_before_offline ?? 'ready') : null,
    labels: row.labels,
    taints: row.taints,
    cpuCores: row.cpu_cores,
    memoryGiB: row.memory_gib,
    gpus: gpus.map((g) => ({
      index: g.idx,
      model: g.model,
      product: g.product,
      vramGiB: g.vram_gib,
      nvlinkDomain: g.nvlink_domain,
      reservationId: g.reservation_id,
    })),
    gpuCount: row.gpu_count,
    freeGpus: row.free_gpus,
    lastHeartbeatAt: isoOrNull(row.last_heartbeat_at),
    stateChangedAt: iso(row.state_changed_at),
    version: row.version,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

async function gpusOf(db: FleetDb, nodeIds: string[]): Promise<Map<string, GpuRow[]>> {
  const map = new Map<string, GpuRow[]>();
  if (nodeIds.length === 0) return map;
  // Who holds each GPU is its slot in the group's row (migration 0003).
  const rows = await db
    .selectFrom('compute.gpus as u')
    .innerJoin('compute.gpu_groups as g', (join) =>
      join.onRef('g.node_id', '=', 'u.node_id').onRef('g.group_no', '=', 'u.group_no'),
    )
    .select([
      'u.node_id',
      'u.idx',
      'u.model',
      'u.product',
      'u.vram_gib',
      'u.nvlink_domain',
      sql<string | null>`g.holders[array_position(g.gpu_indices, u.idx)]`.as('reservation_id'),
    ])
    .where('u.node_id', 'in', nodeIds)
    .orderBy('u.node_id')
    .orderBy('u.idx')
    .execute();
  for (const row of rows) map.set(row.node_id, [...(map.get(row.node_id) ?? []), row]);
  return map;
}

/** A node of a pool the tenant owns; NOT_FOUND otherwise. */
export async function loadNode(
  db: FleetDb,
  tenantId: string,
  nodeId: string,
  forUpdate = false,
): Promise<NodeRow> {
  let query = db
    .selectFrom('compute.nodes')
    .selectAll()
    .where('id', '=', nodeId)
    .where('tenant_id', '=', tenantId);
  if (forUpdate) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) throw notFound('node', nodeId);
  return row;
}

/**
 * A node about to change, locked after its pool: every path that changes nodes and reservations
 * takes the pool first, so an uncordon that starts queued work cannot deadlock with a reserve.
 */
async function lockNodeForChange(db: FleetDb, tenantId: string, nodeId: string): Promise<NodeRow> {
  const peek = await loadNode(db, tenantId, nodeId);
  await lockPool(db, peek.pool_id);
  return loadNode(db, tenantId, nodeId, true);
}

async function viewOf(db: FleetDb, nodeId: string) {
  const row = await db
    .selectFrom('compute.nodes')
    .selectAll()
    .where('id', '=', nodeId)
    .executeTakeFirstOrThrow();
  return nodeView(row, (await gpusOf(db, [nodeId])).get(nodeId) ?? []);
}

/** A retired node is retired for good: nothing but delete changes it. */
function retiredNode(node: NodeRow, change?: string): ComputeError {
  return invalidState(
    `node ${node.id} is retired${change ? `; a retired node's ${change} do not change` : ''}`,
    { state: node.state },
    `A retired node is retired for good: delete it (better-compute nodes delete ${node.id} --yes), and join the machine again with a new join token if it comes back.`,
  );
}

/**
 * A joining node has not sent its first heartbeat, which alone makes it ready: cordoning or
 * draining it would let uncordon make it ready (and take work) without ever having heartbeated.
 */
function joiningNode(node: NodeRow, verb: 'cordoned' | 'drained' | 'uncordoned'): ComputeError {
  return invalidState(
    `node ${node.id} is joining (no heartbeat yet); a joining node is not ${verb}`,
    { state: node.state },
    verb === 'uncordoned'
      ? 'It becomes ready at its first heartbeat; nothing needs uncordoning.'
      : `It takes no work until its first heartbeat makes it ready, and can be ${verb} then. If it should not join, retire it (better-compute nodes retire ${node.id}) and delete it (better-compute nodes delete ${node.id} --yes).`,
  );
}

/**
 * Label keys under SYSTEM_TAINT_PREFIX are refused on nodes as taint keys are: the prefix is
 * compute's own, so a caller's label there could clash with one compute comes to set.
 */
export function refuseSystemLabels(keys: readonly string[], field: string): void {
  const key = keys.find((k) => k.startsWith(SYSTEM_TAINT_PREFIX));
  if (key === undefined) return;
  throw new ComputeError(
    'INVALID_ARGUMENT',
    `label ${key} is under ${SYSTEM_TAINT_PREFIX}, which is compute's own`,
    {
      details: { field, key },
      hint: `Keys under ${SYSTEM_TAINT_PREFIX} are kept for compute (its taints use them). Use label keys of your own, like example.com/rack.`,
    },
  );
}

export async function listNodes(
  ctx: CallContext<{
    poolId?: string | undefined;
    state?: NodeState | undefined;
    limit: number;
    cursor?: string | undefined;
  }>,
) {
  const db = fleetDb(ctx.db);
  // A pool filter names a pool of the tenant's own: one it cannot see is NOT_FOUND and one only
  // offered to it ACCESS_DENIED (its nodes are its owner's), never an empty list that looks fine.
  if (ctx.input.poolId) await ownedPool(db, ctx.tenantId, ctx.input.poolId);
  let query = db.selectFrom('compute.nodes').selectAll().where('tenant_id', '=', ctx.tenantId);
  if (ctx.input.poolId) query = query.where('pool_id', '=', ctx.input.poolId);
  if (ctx.input.state) query = query.where('state', '=', ctx.input.state);
  if (ctx.input.cursor) query = query.where('id', '>', ctx.input.cursor);
  const rows = await query
    .orderBy('id')
    .limit(ctx.input.limit + 1)
    .execute();
  const gpus = await gpusOf(
    db,
    rows.slice(0, ctx.input.limit).map((r) => r.id),
  );
  return pageOfRows(rows, ctx.input.limit, (row) => nodeView(row, gpus.get(row.id) ?? []));
}

export async function getNode(ctx: CallContext<{ nodeId: string }>) {
  const db = fleetDb(ctx.db);
  const row = await loadNode(db, ctx.tenantId, ctx.input.nodeId);
  return nodeView(row, (await gpusOf(db, [row.id])).get(row.id) ?? []);
}

/** A node's events, through the events module's reader (it pages the outbox safely). */
export async function nodeEvents(
  ctx: CallContext<{ nodeId: string; limit: number; cursor?: string | undefined }>,
) {
  await loadNode(fleetDb(ctx.db), ctx.tenantId, ctx.input.nodeId);
  return listEvents(ctx.db, {
    tenantId: ctx.tenantId,
    subject: { type: 'node', id: ctx.input.nodeId },
    limit: ctx.input.limit,
    cursor: ctx.input.cursor,
  });
}

type StateInput = { nodeId: string; reason?: string | undefined; ifVersion?: number | undefined };

export async function cordonNode(ctx: CallContext<StateInput>) {
  const db = fleetDb(ctx.db);
  const node = await lockNodeForChange(db, ctx.tenantId, ctx.input.nodeId);
  checkVersion('node', node.id, node.version, ctx.input.ifVersion);
  const emit: Emit = ctx.emit;
  if (node.state === 'retired') throw retiredNode(node);
  if (node.state === 'joining') throw joiningNode(node, 'cordoned');
  if (node.state === 'offline') {
    await setNodeState(db, node, 'offline', ctx.now(), emit, {
      stateBeforeOffline: 'cordoned',
      eventType: 'node.cordoned',
      reason: ctx.input.reason,
    });
  } else {
    await setNodeState(db, node, 'cordoned', ctx.now(), emit, { reason: ctx.input.reason });
  }
  return viewOf(db, node.id);
}

export async function uncordonNode(ctx: CallContext<StateInput>) {
  const db = fleetDb(ctx.db);
  const node = await lockNodeForChange(db, ctx.tenantId, ctx.input.nodeId);
  checkVersion('node', node.id, node.version, ctx.input.ifVersion);
  if (node.state === 'retired') throw retiredNode(node);
  if (node.state === 'joining') throw joiningNode(node, 'uncordoned');
  if (node.state === 'offline') {
    await setNodeState(db, node, 'offline', ctx.now(), ctx.emit, {
      stateBeforeOffline: 'ready',
      eventType: 'node.uncordoned',
      reason: ctx.input.reason,
    });
  } else if (node.state !== 'ready') {
    await setNodeState(db, node, 'ready', ctx.now(), ctx.emit, {
      reason: ctx.input.reason,
      eventType: 'node.uncordoned',
    });
    await activateQueue(db, node.pool_id, ctx.now(), ctx.emit);
  }
  return viewOf(db, node.id);
}

export async function drainNode(ctx: CallContext<StateInput>) {
  const db = fleetDb(ctx.db);
  const node = await lockNodeForChange(db, ctx.tenantId, ctx.input.nodeId);
  checkVersion('node', node.id, node.version, ctx.input.ifVersion);
  if (node.state === 'retired') throw retiredNode(node);
  if (node.state === 'joining') throw joiningNode(node, 'drained');
  if (node.state === 'offline') {
    await setNodeState(db, node, 'offline', ctx.now(), ctx.emit, {
      stateBeforeOffline: 'draining',
      eventType: 'node.draining',
      reason: ctx.input.reason,
    });
  } else if (node.state !== 'draining' && node.state !== 'drained') {
    await setNodeState(db, node, 'draining', ctx.now(), ctx.emit, { reason: ctx.input.reason });
    await completeDrains(db, [node.id], ctx.now(), ctx.emit);
  }
  return viewOf(db, node.id);
}

export async function retireNode(ctx: CallContext<StateInput & { force: boolean }>) {
  const db = fleetDb(ctx.db);
  const peek = await loadNode(db, ctx.tenantId, ctx.input.nodeId);
  checkVersion('node', peek.id, peek.version, ctx.input.ifVersion);
  if (peek.state === 'retired') return viewOf(db, peek.id);
  await lockPool(db, peek.pool_id);
  // Its reservations end before the node's row is locked: reservation rows come before node rows.
  if (ctx.input.force) await endReservationsOnNode(db, peek.id, ctx.now(), ctx.emit);
  const node = await loadNode(db, ctx.tenantId, peek.id, true);
  if (node.free_gpus < node.gpu_count) {
    throw invalidState(
      `node ${node.id} holds reservations`,
      { state: node.state, reservedGpus: node.gpu_count - node.free_gpus },
      `Drain it and wait until it is drained (better-compute nodes drain ${node.id}), or retire it with --force: its reservations end with reason node-retired.`,
    );
  }
  await setNodeState(db, node, 'retired', ctx.now(), ctx.emit, {
    reason: ctx.input.reason,
    stateBeforeOffline: null,
  });
  await db.updateTable('compute.nodes').set({ credential_hash: null }).where('id', '=', node.id).execute();
  return viewOf(db, node.id);
}

export async function deleteNode(ctx: CallContext<{ nodeId: string; ifVersion?: number | undefined }>) {
  const db = fleetDb(ctx.db);
  const node = await lockNodeForChange(db, ctx.tenantId, ctx.input.nodeId);
  checkVersion('node', node.id, node.version, ctx.input.ifVersion);
  if (node.state !== 'retired' && node.state !== 'cordoned') {
    throw invalidState(
      `node ${node.id} is ${node.state}; only a retired or cordoned node is deleted`,
      { state: node.state },
      // A joining node is not cordoned (it has not heartbeated): retiring it is the way out.
      node.state === 'joining'
        ? `Retire it first (better-compute nodes retire ${node.id}): a joining node is not cordoned.`
        : 'Cordon or retire it first.',
    );
  }
  if (node.free_gpus < node.gpu_count) {
    // A cordoned node keeps what it holds; draining it would make it drained, which delete refuses.
    throw invalidState(
      `node ${node.id} still holds reservations`,
      { state: node.state, reservedGpus: node.gpu_count - node.free_gpus },
      'Wait until its reservations end or are released (nodes get shows which reservation holds each GPU), or retire it with --force, which ends them with reason node-retired; then delete it.',
    );
  }
  await db.deleteFrom('compute.nodes').where('id', '=', node.id).execute();
  ctx.emit({
    type: 'node.deleted',
    subject: { type: 'node', id: node.id },
    data: { poolId: node.pool_id, previousState: node.state },
  });
  return { id: node.id, deleted: true as const };
}

export async function labelNode(
  ctx: CallContext<{
    nodeId: string;
    set: Record<string, string>;
    remove: string[];
    ifVersion?: number | undefined;
  }>,
) {
  const db = fleetDb(ctx.db);
  const node = await lockNodeForChange(db, ctx.tenantId, ctx.input.nodeId);
  checkVersion('node', node.id, node.version, ctx.input.ifVersion);
  if (node.state === 'retired') throw retiredNode(node, 'labels');
  refuseSystemLabels(Object.keys(ctx.input.set), 'set');
  refuseSystemLabels(ctx.input.remove, 'remove');
  const sorted = nextLabels(node.labels, ctx.input.set, ctx.input.remove, {
    merge: true,
    fields: { set: 'set', remove: 'remove' },
  });
  // Nothing changes (a key removed that it lacks, a label set to its value): no version, no event.
  if (sameLabels(sorted, node.labels)) return viewOf(db, node.id);
  await db
    .updateTable('compute.nodes')
    .set({ labels: JSON.stringify(sorted), version: node.version + 1, updated_at: ctx.now() })
    .where('id', '=', node.id)
    .execute();
  ctx.emit({
    type: 'node.labeled',
    subject: { type: 'node', id: node.id },
    data: { labels: sorted, version: node.version + 1 },
  });
  return viewOf(db, node.id);
}

export async function taintNode(
  ctx: CallContext<{
    nodeId: string;
    add: { key: string; value: string; effect: Taint['effect'] }[];
    remove: string[];
    ifVersion?: number | undefined;
  }>,
) {
  const db = fleetDb(ctx.db);
  const node = await lockNodeForChange(db, ctx.tenantId, ctx.input.nodeId);
  checkVersion('node', node.id, node.version, ctx.input.ifVersion);
  if (node.state === 'retired') throw retiredNode(node, 'taints');
  const system = [...ctx.input.remove, ...ctx.input.add.map((t) => t.key)].find((key) =>
    key.startsWith(SYSTEM_TAINT_PREFIX),
  );
  if (system !== undefined) {
    throw new ComputeError('INVALID_ARGUMENT', `taint ${system} is set and cleared by compute only`, {
      details: { field: ctx.input.remove.includes(system) ? 'remove' : 'add', key: system },
      hint: `${INVENTORY_PENDING} goes when the node's reported inventory is put in use, as soon as it holds no reservation. Use taint keys of your own.`,
    });
  }
  refuseSetAndRemoved(
    'taint',
    ctx.input.add.map((t) => t.key),
    ctx.input.remove,
    'remove',
    'Add a taint or remove it, not both: to change its value, add it alone.',
  );
  const byKey = new Map(node.taints.map((t) => [t.key, t]));
  for (const key of ctx.input.remove) byKey.delete(key);
  for (const taint of ctx.input.add) byKey.set(taint.key, taint);
  const taints = sortedTaints(byKey.values());
  // The cap counts the caller's taints: compute's own (inventory-pending) come and go on their own.
  // A node over it from before the cap may still change without growing.
  const own = (list: Iterable<Taint>) =>
    [...list].filter((t) => !t.key.startsWith(SYSTEM_TAINT_PREFIX)).length;
  const count = own(taints);
  if (count > MAX_TAINTS && count > own(node.taints))
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `a node carries at most ${MAX_TAINTS} taints; this change would leave it ${count}`,
      {
        details: { field: 'add', limit: MAX_TAINTS, count },
        hint: 'Remove taints it no longer needs (--remove KEY, in the same call or first), or use fewer keys.',
      },
    );
  // Nothing changes (a key removed that it lacks, a taint added as it is): no version, no event.
  if (canonicalJson(taints) === canonicalJson(sortedTaints(node.taints))) return viewOf(db, node.id);
  await db
    .updateTable('compute.nodes')
    .set({ ...taintColumns(taints), version: node.version + 1, updated_at: ctx.now() })
    .where('id', '=', node.id)
    .execute();
  ctx.emit({
    type: 'node.tainted',
    subject: { type: 'node', id: node.id },
    data: { taints, version: node.version + 1 },
  });
  // A node that lost a NoSchedule taint may take queued work now.
  if (node.no_schedule.some((key) => !byKey.has(key)))
    await activateQueue(db, node.pool_id, ctx.now(), ctx.emit);
  return viewOf(db, node.id);
}

/** A new node in `joining`, with its GPUs and its first inventory revision. */
export async function createNode(
  db: FleetDb,
  options: {
    id: string;
    tenantId: string;
    poolId: string;
    name: string;
    inventory: StoredInventory;
    labels: Record<string, string>;
    credentialHash: string | null;
    /** A site agent (joined with a site token) carries SITE_AGENT_TAINT, so placement never picks it. */
    role?: NodeRole;
    now: Date;
  },
): Promise<void> {
  const { inventory, now } = options;
  const role = options.role ?? 'worker';
  const taints: Taint[] =
    role === 'site-agent' ? [{ key: SITE_AGENT_TAINT, value: '', effect: 'NoSchedule' }] : [];
  await db
    .insertInto('compute.nodes')
    .values({
      id: options.id,
      tenant_id: options.tenantId,
      pool_id: options.poolId,
      name: options.name,
      state: 'joining',
      state_before_offline: null,
      role,
      labels: JSON.stringify(options.labels),
      ...taintColumns(taints),
      cpu_cores: inventory.cpuCores,
      memory_gib: inventory.memoryGiB,
      credential_hash: options.credentialHash,
      gpu_count: inventory.gpus.length,
      free_gpus: inventory.gpus.length,
      last_heartbeat_at: null,
      state_changed_at: now,
      created_at: now,
      updated_at: now,
    })
    .execute();
  await writeGpus(db, { id: options.id, pool_id: options.poolId }, inventory);
  await db
    .insertInto('compute.node_inventories')
    .values({ node_id: options.id, revision: 1, inventory: JSON.stringify(inventory), recorded_at: now })
    .execute();
}
