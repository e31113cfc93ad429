/** `sandboxSnapshots.*`: list (yours, or the tenant's with all), get, and delete on the node. */
import { ComputeError, ownerOf } from '@better-compute/core';
import type { CallContext } from '../define-module.js';
import { loadSnapshot, snapshotView, startWorkflow } from './rows.js';
import { commandStep } from '../workflows/service.js';
import { sandboxDb } from './tables.js';

export async function listSnapshots(
  ctx: CallContext<{
    all: boolean;
    sandboxId?: string | undefined;
    limit: number;
    cursor?: string | undefined;
  }>,
) {
  const { input } = ctx;
  let query = sandboxDb(ctx.db)
    .selectFrom('compute.sandbox_snapshots')
    .selectAll()
    .where('tenant_id', '=', ctx.tenantId)
    .where('state', '<>', 'deleted');
  if (!input.all) query = query.where('owner_id', '=', ctx.identity ? ownerOf(ctx.identity) : '');
  if (input.sandboxId) query = query.where('sandbox_id', '=', input.sandboxId);
  if (input.cursor) query = query.where('id', '<', input.cursor);
  const rows = await query
    .orderBy('id', 'desc')
    .limit(input.limit + 1)
    .execute();
  const page = rows.slice(0, input.limit);
  return {
    items: page.map(snapshotView),
    nextCursor: rows.length > input.limit ? (page.at(-1)?.id ?? null) : null,
  };
}

export async function getSnapshot(ctx: CallContext<{ snapshotId: string }>) {
  return snapshotView(await loadSnapshot(sandboxDb(ctx.db), ctx.tenantId, ctx.input.snapshotId));
}

export async function deleteSnapshot(ctx: CallContext<{ snapshotId: string }>) {
  const db = sandboxDb(ctx.db);
  const row = await loadSnapshot(db, ctx.tenantId, ctx.input.snapshotId, true);
  if (row.state === 'deleting') return snapshotView(row);
  if (row.state === 'deleted' || row.state === 'creating')
    throw new ComputeError('INVALID_STATE', `snapshot ${row.id} is ${row.state}`, {
      details: { state: row.state },
      hint: row.state === 'creating' ? 'Wait until it is ready, then delete it.' : undefined,
    });
  const now = ctx.now();
  const workflowId = await startWorkflow(
    { db: ctx.db, now, emit: ctx.emit },
    row.node_id,
    'sandbox.snapshot-delete',
    { snapshotId: row.id },
    [commandStep('remove the snapshot files', 'sandbox.snapshot-delete', { snapshotId: row.id })],
    `delete snapshot ${row.id}`,
  );
  const updated = await db
    .updateTable('compute.sandbox_snapshots')
    .set({ state: 'deleting', workflow_id: workflowId, updated_at: now })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  return snapshotView(updated);
}
