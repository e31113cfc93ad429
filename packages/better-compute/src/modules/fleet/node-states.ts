/**
 * Node changes shared by the node methods, the heartbeat, releases and the controller: states, and
 * putting a reported inventory in use. Every change bumps the node's version and writes an event to
 * the pool owner's tenant; a change that changes nothing does neither.
 *
 *   joining ──heartbeat──▶ ready ⇄ cordoned          draining ──last reservation ends──▶ drained
 *   any live state ──no heartbeat──▶ offline ──heartbeat──▶ the state it had     any ──▶ retired
 */
import { canonicalJson } from '@better-compute/core';
import { SYSTEM_TAINT_PREFIX } from '@better-compute/core/methods';
import type { CatalogEventDraft } from '@better-compute/events';
import type { FleetDb, NodeState, StoredInventory, Taint } from './tables.js';

export type Emit = (event: CatalogEventDraft) => void;

/** The events a node's change of state is recorded as. */
type NodeStateEvent =
  | 'node.joining'
  | 'node.ready'
  | 'node.cordoned'
  | 'node.uncordoned'
  | 'node.draining'
  | 'node.drained'
  | 'node.offline'
  | 'node.online'
  | 'node.retired';

// Taint keys under SYSTEM_TAINT_PREFIX are compute's own: it sets and clears them, `nodes.taint` never does.
export { SYSTEM_TAINT_PREFIX };

/**
 * The NoSchedule taint of a node whose reported inventory waits to be put in use: placement (the
 * fast reserve, best fit and activation alike) already keeps new work off tainted nodes, so no new
 * reservation is bound to a GPU the node may no longer have (docs/decisions/fleet-joining.md).
 */
export const INVENTORY_PENDING = `${SYSTEM_TAINT_PREFIX}inventory-pending`;
/**
 * A site agent's taint, set when it joins and never cleared (system taints are compute's alone):
 * the agent runs the site's BMC and PXE work, and a reservation placed on it would share the
 * machine that holds every BMC password it is sent.
 */
export const SITE_AGENT_TAINT = `${SYSTEM_TAINT_PREFIX}site-agent`;

const EVENT_OF: Record<NodeState, NodeStateEvent> = {
  joining: 'node.joining',
  ready: 'node.ready',
  cordoned: 'node.cordoned',
  draining: 'node.draining',
  drained: 'node.drained',
  offline: 'node.offline',
  retired: 'node.retired',
};

export interface NodeRef {
  id: string;
  tenant_id: string;
  pool_id: string;
  state: NodeState;
  version: number;
  /** When known: a change of an offline node's return state to the one it has is no change. */
  state_before_offline?: NodeState | null;
}

/** Moves a node to `to` (no-op when it is there, with the same return state); returns the new version. */
export async function setNodeState(
  db: FleetDb,
  node: NodeRef,
  to: NodeState,
  now: Date,
  emit: Emit,
  extra: {
    reason?: string | undefined;
    stateBeforeOffline?: NodeState | null;
    eventType?: NodeStateEvent;
  } = {},
): Promise<number> {
  if (
    node.state === to &&
    (extra.stateBeforeOffline === undefined || extra.stateBeforeOffline === node.state_before_offline)
  )
    return node.version;
  const version = node.version + 1;
  await db
    .updateTable('compute.nodes')
    .set({
      state: to,
      version,
      updated_at: now,
      ...(node.state !== to ? { state_changed_at: now } : {}),
      ...(extra.stateBeforeOffline !== undefined ? { state_before_offline: extra.stateBeforeOffline } : {}),
    })
    .where('id', '=', node.id)
    .execute();
  emit({
    type: extra.eventType ?? EVENT_OF[to],
    tenantId: node.tenant_id,
    subject: { type: 'node', id: node.id },
    data: {
      state: to,
      previousState: node.state,
      poolId: node.pool_id,
      version,
      ...(extra.reason ? { reason: extra.reason } : {}),
    },
  });
  node.state = to;
  node.version = version;
  if (extra.stateBeforeOffline !== undefined) node.state_before_offline = extra.stateBeforeOffline;
  return version;
}

/** Draining nodes among `nodeIds` that hold no reservation any more become drained; returns their ids. */
export async function completeDrains(
  db: FleetDb,
  nodeIds: readonly string[],
  now: Date,
  emit: Emit,
): Promise<string[]> {
  if (nodeIds.length === 0) return [];
  const draining = await db
    .selectFrom('compute.nodes')
    .select(['id', 'tenant_id', 'pool_id', 'state', 'version'])
    .where('id', 'in', [...new Set(nodeIds)])
    .where('state', '=', 'draining')
    .whereRef('free_gpus', '=', 'gpu_count')
    .orderBy('seq')
    .forUpdate()
    .execute();
  for (const node of draining) await setNodeState(db, node, 'drained', now, emit);
  return draining.map((n) => n.id);
}

export function sortedTaints(taints: Iterable<Taint>): Taint[] {
  return [...taints].sort((a, b) => (a.key < b.key ? -1 : 1));
}

/** The columns a node's sorted taints are kept in: the list, and the NoSchedule keys placement reads. */
export function taintColumns(taints: Taint[]) {
  return {
    taints: JSON.stringify(taints),
    no_schedule: taints.filter((t) => t.effect === 'NoSchedule').map((t) => t.key),
  };
}

const gpusOf = (inventory: StoredInventory) =>
  canonicalJson([...inventory.gpus].sort((a, b) => a.index - b.index));

/**
 * Puts a node's newest reported inventory in use where that is safe (its row locked by the
 * caller): at once when its GPUs are the GPUs in use (only CPU or memory changed, or a change was
 * reported and then undone), else only while the node holds no reservation, so a binding never
 * points at a GPU that vanished under it. While it waits the node carries INVENTORY_PENDING and
 * takes no new work. Returns whether a ready node can take work it could not before.
 */
export async function settleInventory(db: FleetDb, nodeId: string, now: Date, emit: Emit): Promise<boolean> {
  const node = await db
    .selectFrom('compute.nodes')
    .selectAll()
    .where('id', '=', nodeId)
    .executeTakeFirstOrThrow();
  if (node.state === 'retired' || node.reported_revision === node.inventory_revision) return false;
  const rows = await db
    .selectFrom('compute.node_inventories')
    .selectAll()
    .where('node_id', '=', nodeId)
    .where('revision', 'in', [node.inventory_revision, node.reported_revision])
    .execute();
  const inUse = rows.find((r) => r.revision === node.inventory_revision)!.inventory;
  const reported = rows.find((r) => r.revision === node.reported_revision)!;
  const sameGpus = gpusOf(inUse) === gpusOf(reported.inventory);
  const empty = node.free_gpus === node.gpu_count;
  const pending = node.taints.some((t) => t.key === INVENTORY_PENDING);
  const emitTo = { tenantId: node.tenant_id, subject: { type: 'node' as const, id: nodeId } };
  if (!sameGpus && !empty) {
    if (pending) return false;
    const taints = sortedTaints([
      ...node.taints,
      { key: INVENTORY_PENDING, value: '', effect: 'NoSchedule' },
    ]);
    await db
      .updateTable('compute.nodes')
      .set({ ...taintColumns(taints), version: node.version + 1, updated_at: now })
      .where('id', '=', nodeId)
      .execute();
    emit({
      ...emitTo,
      type: 'node.tainted',
      data: {
        taints,
        version: node.version + 1,
        reason: `inventory revision ${reported.revision} waits until the node holds no reservation`,
      },
    });
    return false;
  }
  const inventory = reported.inventory;
  if (!sameGpus) await writeGpus(db, node, inventory);
  const taints = node.taints.filter((t) => t.key !== INVENTORY_PENDING);
  const version = node.version + 1;
  await db
    .updateTable('compute.nodes')
    .set({
      inventory_revision: reported.revision,
      cpu_cores: inventory.cpuCores,
      memory_gib: inventory.memoryGiB,
      ...(sameGpus ? {} : { gpu_count: inventory.gpus.length, free_gpus: inventory.gpus.length }),
      ...(pending ? taintColumns(taints) : {}),
      version,
      updated_at: now,
    })
    .where('id', '=', nodeId)
    .execute();
  emit({
    ...emitTo,
    type: 'node.inventory.applied',
    data: { revision: reported.revision, gpus: inventory.gpus.length, version },
  });
  if (pending)
    emit({ ...emitTo, type: 'node.tainted', data: { taints, version, reason: 'inventory applied' } });
  return node.state === 'ready' && (pending || !sameGpus);
}

/** GPUs grouped by product, VRAM and NVLink domain, in index order. */
function gpuGroupsOf(inventory: StoredInventory) {
  const groups: {
    key: string;
    model: string;
    product: string;
    vramGiB: number;
    nvlinkDomain: string | null;
    indices: number[];
  }[] = [];
  for (const gpu of [...inventory.gpus].sort((a, b) => a.index - b.index)) {
    const key = JSON.stringify([gpu.model, gpu.product, gpu.vramGiB, gpu.nvlinkDomain]);
    let group = groups.find((g) => g.key === key);
    if (!group) {
      group = {
        key,
        model: gpu.model,
        product: gpu.product,
        vramGiB: gpu.vramGiB,
        nvlinkDomain: gpu.nvlinkDomain,
        indices: [],
      };
      groups.push(group);
    }
    group.indices.push(gpu.index);
  }
  return groups;
}

/** Writes a node's GPU rows and groups from an inventory (the node holds no binding). */
export async function writeGpus(
  db: FleetDb,
  node: { id: string; pool_id: string },
  inventory: StoredInventory,
): Promise<void> {
  await db.deleteFrom('compute.gpus').where('node_id', '=', node.id).execute();
  await db.deleteFrom('compute.gpu_groups').where('node_id', '=', node.id).execute();
  const groups = gpuGroupsOf(inventory);
  if (groups.length === 0) return;
  await db
    .insertInto('compute.gpu_groups')
    .values(
      groups.map((g, groupNo) => ({
        node_id: node.id,
        group_no: groupNo,
        pool_id: node.pool_id,
        model: g.model,
        product: g.product,
        vram_gib: g.vramGiB,
        nvlink_domain: g.nvlinkDomain,
        total: g.indices.length,
        free: g.indices.length,
        gpu_indices: g.indices,
        holders: g.indices.map(() => null),
      })),
    )
    .execute();
  await db
    .insertInto('compute.gpus')
    .values(
      groups.flatMap((g, groupNo) =>
        g.indices.map((idx) => ({
          node_id: node.id,
          idx,
          group_no: groupNo,
          pool_id: node.pool_id,
          model: g.model,
          product: g.product,
          vram_gib: g.vramGiB,
          nvlink_domain: g.nvlinkDomain,
        })),
      ),
    )
    .execute();
}
