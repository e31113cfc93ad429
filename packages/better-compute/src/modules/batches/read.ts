/**
 * Reading batches: `list` (newest first), `get`, `scope` (the leaves in tree order, paged by index,
 * so a reviewer recomputes the root from what it was shown) and `members` (the member commands in
 * leaf order). A batch whose window closed while pending has its expiry written before the answer.
 */
import { cursorRow, notACursor, pageOf } from '../../db/pages.js';
import { batchCommandIndex, batchCommandsPage } from '../commands/queries.js';
import type { CommandRow } from '../commands/tables.js';
import type { CallContext } from '../define-module.js';
import { expireDue } from './expiry.js';
import { type BatchState, batchesDb } from './tables.js';
import { approvalsOf, batchView, loadBatch, memberView } from './views.js';

type BatchInput = { batchId: string };

export async function listBatches(
  ctx: CallContext<{ state?: BatchState | undefined; limit: number; cursor?: string | undefined }>,
) {
  const now = ctx.now();
  await expireDue(ctx.db, ctx.tenantId, now);
  const db = batchesDb(ctx.db);
  let query = db
    .selectFrom('compute.command_batches')
    .selectAll()
    .where('tenant_id', '=', ctx.tenantId)
    .orderBy('seq', 'desc')
    .limit(ctx.input.limit + 1);
  if (ctx.input.state) query = query.where('state', '=', ctx.input.state);
  const after = await cursorRow(ctx.input.cursor, 'batch', (id) =>
    db
      .selectFrom('compute.command_batches')
      .select('seq')
      .where('id', '=', id)
      .where('tenant_id', '=', ctx.tenantId)
      .executeTakeFirst(),
  );
  if (after) query = query.where('seq', '<', after.seq);
  const rows = await query.execute();
  const approvals = await approvalsOf(
    db,
    rows.slice(0, ctx.input.limit).map((row) => row.id),
  );
  return pageOf(rows, ctx.input.limit, (row) =>
    batchView(
      row,
      approvals.filter((approval) => approval.batch_id === row.id),
      now,
    ),
  );
}

export async function getBatch(ctx: CallContext<BatchInput>) {
  const now = ctx.now();
  await expireDue(ctx.db, ctx.tenantId, now, ctx.input.batchId);
  const db = batchesDb(ctx.db);
  const row = await loadBatch(db, ctx.tenantId, ctx.input.batchId);
  return batchView(row, await approvalsOf(db, [row.id]), now);
}

export async function batchScope(
  ctx: CallContext<BatchInput & { limit: number; cursor?: string | undefined }>,
) {
  const db = batchesDb(ctx.db);
  const row = await loadBatch(db, ctx.tenantId, ctx.input.batchId);
  const start = ctx.input.cursor === undefined ? 0 : Number(ctx.input.cursor);
  if (start >= row.size) throw notACursor('leaf of this batch');
  const leaves = await db
    .selectFrom('compute.command_batch_leaves')
    .select(['idx', 'subject', 'kind', 'payload'])
    .where('batch_id', '=', row.id)
    .where('idx', '>=', start)
    .orderBy('idx')
    .limit(ctx.input.limit)
    .execute();
  const next = start + leaves.length;
  return {
    batchId: row.id,
    root: row.root,
    size: row.size,
    items: leaves.map((leaf) => ({
      index: leaf.idx,
      subject: leaf.subject,
      kind: leaf.kind,
      payload: leaf.payload,
    })),
    nextCursor: next < row.size ? String(next) : null,
  };
}

export async function batchMembers(
  ctx: CallContext<
    BatchInput & { state?: CommandRow['state'] | undefined; limit: number; cursor?: string | undefined }
  >,
) {
  await expireDue(ctx.db, ctx.tenantId, ctx.now(), ctx.input.batchId);
  const row = await loadBatch(batchesDb(ctx.db), ctx.tenantId, ctx.input.batchId);
  const afterIndex = await cursorRow(ctx.input.cursor, 'member of this batch', (id) =>
    batchCommandIndex(ctx.db, row.id, id),
  );
  const rows = await batchCommandsPage(ctx.db, row.id, {
    state: ctx.input.state,
    limit: ctx.input.limit,
    afterIndex: afterIndex ?? null,
  });
  return pageOf(rows, ctx.input.limit, memberView);
}
