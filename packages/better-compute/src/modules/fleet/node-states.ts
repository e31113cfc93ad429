/**
 * Node state changes shared by the node methods, the heartbeat, releases and the controller. Every
 * change bumps the node's version and writes a `node.<state>` event to the pool owner's tenant.
 *
 *   joining ──heartbeat──▶ ready ⇄ cordoned          draining ──last reservation ends──▶ drained
 *   any live state ──no heartbeat──▶ offline ──heartbeat──▶ the state it had     any ──▶ retired
 */
import type { EventDraft } from '../define-module.js';
import type { FleetDb, NodeState } from './tables.js';

export type Emit = (event: EventDraft) => void;

/** States whose nodes take new reservations. */
export const SCHEDULABLE: readonly NodeState[] = ['ready'];

const EVENT_OF: Record<NodeState, string> = {
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
}

/** Moves a node to `to` (no-op when it is there); returns the new version. */
export async function setNodeState(
  db: FleetDb,
  node: NodeRef,
  to: NodeState,
  now: Date,
  emit: Emit,
  extra: { reason?: string | undefined; stateBeforeOffline?: NodeState | null; eventType?: string } = {},
): Promise<number> {
  if (node.state === to && extra.stateBeforeOffline === undefined) return node.version;
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
  return version;
}

/** Draining nodes among `nodeIds` that hold no reservation any more become drained. */
export async function completeDrains(
  db: FleetDb,
  nodeIds: readonly string[],
  now: Date,
  emit: Emit,
): Promise<void> {
  if (nodeIds.length === 0) return;
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
}
