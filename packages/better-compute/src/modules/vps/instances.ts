/**
 * Instances as rows: their view, reading them, moving their state (one event per transition, in
 * the transaction that makes it), and starting the workflow that carries a change to their node.
 */
import { ComputeError } from '@better-compute/core';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { CatalogEventDraft } from '@better-compute/events';
import type { CallContext } from '../define-module.js';
import { iso, isoOrNull } from '../fleet/common.js';
import { startNodeWorkflow } from '../workflows/service.js';
import type { WorkflowKind, WorkflowStep } from '../workflows/tables.js';
import { type InstanceRow, type InstanceState, vpsDb, type VpsDb } from './tables.js';

export function instanceView(row: InstanceRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    poolId: row.pool_id,
    nodeId: row.node_id,
    flavorId: row.flavor_id,
    imageId: row.image_id,
    name: row.name,
    state: row.state,
    reason: row.reason,
    vcpus: row.vcpus,
    memoryMiB: row.memory_mib,
    diskGiB: row.disk_gib,
    gpus: row.gpus,
    reservationId: row.reservation_id,
    workflowId: row.workflow_id,
    address: row.address,
    sshPort: row.ssh_port,
    egress: row.egress,
    version: row.version,
    ownerId: row.owner_id,
    agentId: row.agent_id,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
    deletedAt: isoOrNull(row.deleted_at),
  };
}

function instanceNotFound(id: string) {
  return new ComputeError('NOT_FOUND', `instance ${id} does not exist`, {
    details: { id },
    hint: 'better-compute instances list shows your tenant’s instances.',
  });
}

export async function loadInstance(db: VpsDb, tenantId: string, id: string, forUpdate = false) {
  let query = db
    .selectFrom('compute.instances')
    .selectAll()
    .where('id', '=', id)
    .where('tenant_id', '=', tenantId);
  if (forUpdate) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) throw instanceNotFound(id);
  return row;
}

/** Who owns an instance, for `@own` decisions (start, stop, resize and delete your own). */
export async function instanceOwner(
  db: Kysely<ComputeTables>,
  tenantId: string,
  input: { instanceId: string },
): Promise<string | null> {
  const row = await vpsDb(db)
    .selectFrom('compute.instances')
    .select('owner_id')
    .where('id', '=', input.instanceId)
    .where('tenant_id', '=', tenantId)
    .executeTakeFirst();
  return row?.owner_id ?? null;
}

export async function listInstances(
  ctx: CallContext<{
    state?: InstanceState | undefined;
    poolId?: string | undefined;
    limit: number;
    cursor?: string | undefined;
  }>,
) {
  let query = vpsDb(ctx.db).selectFrom('compute.instances').selectAll().where('tenant_id', '=', ctx.tenantId);
  query = ctx.input.state
    ? query.where('state', '=', ctx.input.state)
    : query.where('state', '<>', 'deleted');
  if (ctx.input.poolId) query = query.where('pool_id', '=', ctx.input.poolId);
  if (ctx.input.cursor) query = query.where('id', '<', ctx.input.cursor);
  const rows = await query
    .orderBy('id', 'desc')
    .limit(ctx.input.limit + 1)
    .execute();
  const page = rows.slice(0, ctx.input.limit);
  return {
    items: page.map(instanceView),
    nextCursor: rows.length > ctx.input.limit ? (page.at(-1)?.id ?? null) : null,
  };
}

export async function getInstance(ctx: CallContext<{ instanceId: string }>) {
  return instanceView(await loadInstance(vpsDb(ctx.db), ctx.tenantId, ctx.input.instanceId));
}

/** The event of a transition into `state`. */
export function instanceEvent(
  row: InstanceRow,
  state: Exclude<InstanceState, never>,
  previousState: InstanceState | null,
  extra: { reason?: string } = {},
): CatalogEventDraft {
  // The type is built from the state, which TypeScript cannot relate to the catalog's union; every
  // instance.<state> type takes this payload (events/catalog.ts).
  return {
    type: `instance.${state}`,
    tenantId: row.tenant_id,
    subject: { type: 'instance', id: row.id },
    data: {
      state,
      previousState,
      poolId: row.pool_id,
      nodeId: row.node_id,
      version: row.version,
      workflowId: row.workflow_id,
      ...extra,
    },
  } as unknown as CatalogEventDraft;
}

/** Moves an instance to `state` (its version counts up) and tells it. */
export async function moveInstance(
  db: Kysely<ComputeTables>,
  row: InstanceRow,
  state: InstanceState,
  now: Date,
  emit: (event: CatalogEventDraft) => void,
  change: Partial<{
    reason: string | null;
    workflow_id: string | null;
    address: string | null;
    ssh_port: number | null;
    deleted_at: Date | null;
    reservation_id: string | null;
    vcpus: number;
    memory_mib: number;
    disk_gib: number;
    flavor_id: string;
  }> = {},
): Promise<InstanceRow> {
  const updated = await vpsDb(db)
    .updateTable('compute.instances')
    .set({ reason: null, ...change, state, version: row.version + 1, updated_at: now })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  emit(instanceEvent(updated, state, row.state, updated.reason ? { reason: updated.reason } : {}));
  return updated;
}

/** Starts an instance workflow on the instance's node; the controller job advances it. */
export async function startInstanceWorkflow(
  ctx: Pick<CallContext, 'db' | 'emit' | 'now'>,
  instance: Pick<InstanceRow, 'id' | 'tenant_id' | 'node_id'>,
  kind: Exclude<WorkflowKind, 'node.maintenance'>,
  steps: WorkflowStep[],
  reason: string,
): Promise<string> {
  // The workflow and its commands are the node's, in its owner's tenant: the pool's operators see
  // what runs on their machines; the instance's tenant sees its instance move.
  return startNodeWorkflow(
    { db: ctx.db, emit: ctx.emit, now: ctx.now() },
    {
      nodeId: instance.node_id,
      instanceId: instance.id,
      kind,
      steps,
      input: { instanceId: instance.id },
      reason,
    },
  );
}
