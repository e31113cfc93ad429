/**
 * `sandboxVolumes.*`: a volume lives on one node of its pool (placed when created), grows and
 * never shrinks, and is wiped when deleted; a template that mounts it keeps it from being deleted.
 */
import { ComputeError, newId, ownerOf } from '@better-compute/core';
import type { CatalogEventDraft } from '@better-compute/events';
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { CallContext } from '../define-module.js';
import { checkVersion } from '../fleet/common.js';
import { lockPool } from '../fleet/locks.js';
import { visiblePool } from '../fleet/pools.js';
import { asFleet, vpsDb } from '../vps/tables.js';
import { nodesRunning } from './placement.js';
import { loadVolume, startWorkflow, volumeView } from './rows.js';
import { commandStep } from '../workflows/service.js';
import { sandboxDb, type VolumeRow } from './tables.js';

export function volumeEvent(
  type:
    | 'sandbox-volume.created'
    | 'sandbox-volume.ready'
    | 'sandbox-volume.resized'
    | 'sandbox-volume.deleted'
    | 'sandbox-volume.failed',
  row: VolumeRow,
): CatalogEventDraft {
  return {
    type,
    tenantId: row.tenant_id,
    subject: { type: 'sandboxVolume', id: row.id },
    data: {
      state: row.state,
      poolId: row.pool_id,
      nodeId: row.node_id,
      sizeGiB: row.size_gib,
      version: row.version,
      ...(row.reason ? { reason: row.reason } : {}),
    },
  };
}

/**
 * Who a volume belongs to (the person that made it, or the one its agent acted for), read before
 * a call on it is decided so `@own` patterns apply: a member resizes and deletes its own volumes.
 * Null for a volume that does not exist, or is not the tenant's, so no `@own` pattern matches it.
 */
export async function volumeOwner(db: Kysely<ComputeTables>, tenantId: string, input: { volumeId: string }) {
  const row = await sandboxDb(db)
    .selectFrom('compute.sandbox_volumes')
    .select('owner_id')
    .where('id', '=', input.volumeId)
    .where('tenant_id', '=', tenantId)
    .executeTakeFirst();
  return row?.owner_id ?? null;
}

export async function createVolume(ctx: CallContext<{ poolId: string; name: string; sizeGiB: number }>) {
  const { input } = ctx;
  const db = sandboxDb(ctx.db);
  const { pool } = await visiblePool(asFleet(vpsDb(ctx.db)), ctx.tenantId, input.poolId);
  if (pool.class !== 'vps')
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `pool ${pool.id} is a ${pool.class} pool; sandbox volumes live on vps pools`,
      {
        details: { field: 'poolId' },
      },
    );
  await lockPool(asFleet(vpsDb(ctx.db)), pool.id);
  const same = await db
    .selectFrom('compute.sandbox_volumes')
    .select('id')
    .where('tenant_id', '=', ctx.tenantId)
    .where('name', '=', input.name)
    .where('state', '<>', 'deleted')
    .executeTakeFirst();
  if (same)
    throw new ComputeError(
      'ALREADY_EXISTS',
      `your tenant has a sandbox volume named ${input.name}: ${same.id}`,
      {
        details: { field: 'name', id: same.id },
        hint: 'Pick another name, or use that volume.',
      },
    );
  // The node with the fewest volumes, so volumes spread over the pool.
  const nodes = await nodesRunning(ctx.db, pool.id, null);
  if (nodes.length === 0)
    throw new ComputeError('UNAVAILABLE', `pool ${pool.id} has no ready node to hold a volume`, {
      details: { poolId: pool.id },
      hint: 'Retry when a node of the pool is ready.',
    });
  const counts = await db
    .selectFrom('compute.sandbox_volumes')
    .select(['node_id', sql<number>`count(*)::int`.as('n')])
    .where('node_id', 'in', nodes)
    .where('state', '<>', 'deleted')
    .groupBy('node_id')
    .execute();
  const countOf = (id: string) => Number(counts.find((c) => c.node_id === id)?.n ?? 0);
  const nodeId = [...nodes].sort((a, b) => countOf(a) - countOf(b))[0]!;
  const now = ctx.now();
  const id = newId('volume');
  const workflowId = await startWorkflow(
    { db: ctx.db, now, emit: ctx.emit },
    nodeId,
    'volume.create',
    { volumeId: id },
    [
      commandStep(`make a ${input.sizeGiB} GiB volume`, 'volume.create', {
        volumeId: id,
        sizeGiB: input.sizeGiB,
      }),
    ],
    `create volume ${input.name}`,
  );
  const row = await db
    .insertInto('compute.sandbox_volumes')
    .values({
      id,
      tenant_id: ctx.tenantId,
      pool_id: pool.id,
      node_id: nodeId,
      name: input.name,
      size_gib: input.sizeGiB,
      state: 'creating',
      reason: null,
      owner_id: ctx.identity ? ownerOf(ctx.identity) : null,
      workflow_id: workflowId,
      created_at: now,
      updated_at: now,
      deleted_at: null,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit(volumeEvent('sandbox-volume.created', row));
  return volumeView(db, row);
}

export async function listVolumes(
  ctx: CallContext<{
    all: boolean;
    poolId?: string | undefined;
    deleted: boolean;
    limit: number;
    cursor?: string | undefined;
  }>,
) {
  const { input } = ctx;
  const db = sandboxDb(ctx.db);
  let query = db.selectFrom('compute.sandbox_volumes').selectAll().where('tenant_id', '=', ctx.tenantId);
  if (!input.all) query = query.where('owner_id', '=', ctx.identity ? ownerOf(ctx.identity) : '');
  if (!input.deleted) query = query.where('state', '<>', 'deleted');
  if (input.poolId) query = query.where('pool_id', '=', input.poolId);
  if (input.cursor) query = query.where('id', '<', input.cursor);
  const rows = await query
    .orderBy('id', 'desc')
    .limit(input.limit + 1)
    .execute();
  const page = rows.slice(0, input.limit);
  const items = [];
  for (const row of page) items.push(await volumeView(db, row));
  return { items, nextCursor: rows.length > input.limit ? (page.at(-1)?.id ?? null) : null };
}

export async function getVolume(ctx: CallContext<{ volumeId: string }>) {
  const db = sandboxDb(ctx.db);
  return volumeView(db, await loadVolume(db, ctx.tenantId, ctx.input.volumeId));
}

export async function resizeVolume(
  ctx: CallContext<{ volumeId: string; sizeGiB: number; ifVersion?: number | undefined }>,
) {
  const db = sandboxDb(ctx.db);
  const row = await loadVolume(db, ctx.tenantId, ctx.input.volumeId, true);
  checkVersion('sandbox volume', row.id, row.version, ctx.input.ifVersion);
  if (row.state !== 'ready' || !row.node_id)
    throw new ComputeError(
      'INVALID_STATE',
      `volume ${row.id} is ${row.state}; only a ready volume is resized`,
      {
        details: { state: row.state },
      },
    );
  if (ctx.input.sizeGiB <= row.size_gib)
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `volume ${row.id} is ${row.size_gib} GiB; a resize only grows it (asked ${ctx.input.sizeGiB} GiB)`,
      {
        details: { field: 'sizeGiB', sizeGiB: row.size_gib },
        hint: `Pass --size above ${row.size_gib}; to shrink, copy the data to a new, smaller volume.`,
      },
    );
  const now = ctx.now();
  const workflowId = await startWorkflow(
    { db: ctx.db, now, emit: ctx.emit },
    row.node_id,
    'volume.resize',
    { volumeId: row.id, sizeGiB: String(ctx.input.sizeGiB) },
    [
      commandStep(`grow to ${ctx.input.sizeGiB} GiB`, 'volume.resize', {
        volumeId: row.id,
        sizeGiB: ctx.input.sizeGiB,
      }),
    ],
    `resize volume ${row.name}`,
  );
  const updated = await db
    .updateTable('compute.sandbox_volumes')
    .set({ state: 'resizing', workflow_id: workflowId, version: row.version + 1, updated_at: now })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  return volumeView(db, updated);
}

export async function deleteVolume(ctx: CallContext<{ volumeId: string; ifVersion?: number | undefined }>) {
  const db = sandboxDb(ctx.db);
  const row = await loadVolume(db, ctx.tenantId, ctx.input.volumeId, true);
  checkVersion('sandbox volume', row.id, row.version, ctx.input.ifVersion);
  if (row.state === 'deleting') return volumeView(db, row);
  if (row.state === 'deleted' || row.state === 'creating' || row.state === 'resizing')
    throw new ComputeError('INVALID_STATE', `volume ${row.id} is ${row.state}`, {
      details: { state: row.state },
    });
  const view = await volumeView(db, row);
  if (view.templateIds.length)
    throw new ComputeError(
      'CONFLICT',
      `volume ${row.id} is mounted by template(s) ${view.templateIds.join(', ')}`,
      {
        details: { id: row.id, templateIds: view.templateIds },
        hint: `Remove it from them first (better-compute sandbox-template update ${view.templateIds[0]} --volumes "").`,
      },
    );
  const now = ctx.now();
  const workflowId = row.node_id
    ? await startWorkflow(
        { db: ctx.db, now, emit: ctx.emit },
        row.node_id,
        'volume.delete',
        { volumeId: row.id },
        [commandStep('wipe and remove the volume', 'volume.delete', { volumeId: row.id })],
        `delete volume ${row.name}`,
      )
    : null;
  const updated = await db
    .updateTable('compute.sandbox_volumes')
    .set({ state: 'deleting', workflow_id: workflowId, version: row.version + 1, updated_at: now })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  return volumeView(db, updated);
}
