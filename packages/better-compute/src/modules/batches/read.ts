/**
 * Reading batches: `list` (newest first), `get`, `scope` (the leaves in tree order, paged by index,
 * so a reviewer recomputes the root from what it was shown) and `members` (the member commands in
 * leaf order). A batch whose window closed while pending has its expiry written before the answer.
 */
import { ComputeError } from '@better-compute/core';
import { batchCommandIndex, batchCommandsPage } from '../commands/queries.js';
import type { CommandRow } from '../commands/tables.js';
import type { CallContext } from '../define-module.js';
import { expireDue } from './expiry.js';
import { type BatchState, batchesDb } from './tables.js';
import { approvalsOf, batchView, loadBatch, memberView } from './views.js';

type BatchInput = { batchId: string };

function notACursor(what: string): ComputeError {
  return new ComputeError('INVALID_ARGUMENT', `the cursor names no ${what}`, {
    details: { field: 'cursor' },
    hint: 'Pass the nextCursor of the previous page, or leave --cursor out.',
  });
}

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
  if (ctx.input.cursor) {
    const after = await db
      .selectFrom('compute.command_batches')
      .select('seq')
      .where('id', '=', ctx.input.cursor)
      .where('tenant_id', '=', ctx.tenantId)
      .executeTakeFirst();
    if (!after) throw notACursor('batch');
    query = query.where('seq', '<', after.seq);
  }
  const rows = await query.execute();
  const page = rows.slice(0, ctx.input.limit);
  const approvals = await approvalsOf(
    db,
    page.map((row) => row.id),
  );
  return {
    items: page.map((row) =>
      batchView(
        row,
        approvals.filter((approval) => approval.batch_id === row.id),
        now,
      ),
    ),
    nextCursor: rows.length > ctx.input.limit ? page.at(-1)!.id : null,
  };
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
  let afterIndex: number | null = null;
  if (ctx.input.cursor) {
    const index = await batchCommandIndex(ctx.db, row.id, ctx.input.cursor);
    if (index === undefined) throw notACursor('member of this batch');
    afterIndex = index;
  }
  const rows = await batchCommandsPage(ctx.db, row.id, {
    state: ctx.input.state,
    limit: ctx.input.limit,
    afterIndex,
  });
  const page = rows.slice(0, ctx.input.limit);
  return {
    items: page.map(memberView),
    nextCursor: rows.length > ctx.input.limit ? page.at(-1)!.id : null,
  };
}
