/**
 * A pending batch whose window closed is expired: it reads so at once, and the change is written
 * (state, end, its held members cancelled, `batch.expired`) by the job queued for its window's end,
 * or by the first read that notices, whichever comes first. Both take the batch's lock and check
 * again, so it is written once.
 */
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { writeEvents } from '../../db/unit-of-work.js';
import { enqueueJob } from '../../workers/jobs.js';
import { cancelHeldCommands } from '../commands/queries.js';
import type { JobContext } from '../define-module.js';
import { type BatchesDb, batchesDb } from './tables.js';
import { EXPIRED_MEMBER_ERROR } from './views.js';

export const BATCH_EXPIRY_JOB = 'batch.expire';

/** Writes a batch's expiry if it is pending and its window has closed at `now`; in its own transaction. */
async function expireBatch(
  db: Kysely<ComputeTables>,
  batchId: string,
  now: Date,
): Promise<'expired' | 'not-due' | 'ended'> {
  return db.transaction().execute(async (trx) => {
    const row = await batchesDb(trx)
      .selectFrom('compute.command_batches')
      .selectAll()
      .where('id', '=', batchId)
      .forUpdate()
      .executeTakeFirst();
    if (!row || row.state !== 'pending') return 'ended';
    if (new Date(row.not_after).getTime() > now.getTime()) return 'not-due';
    await batchesDb(trx)
      .updateTable('compute.command_batches')
      .set({ state: 'expired', ended_at: row.not_after })
      .where('id', '=', row.id)
      .execute();
    const cancelled = await cancelHeldCommands(trx, row.id, now, EXPIRED_MEMBER_ERROR);
    await writeEvents(
      trx,
      [
        {
          type: 'batch.expired',
          subject: { type: 'batch', id: row.id },
          data: { size: row.size, approvalsNeeded: row.approvals_needed, cancelledCommands: cancelled },
        },
      ],
      { tenantId: row.tenant_id, actor: null, requestId: `batch-expiry:${row.id}` },
    );
    return 'expired';
  });
}

/** Writes the expiry of the tenant's pending batches whose window has closed (before a read answers). */
export async function expireDue(
  db: Kysely<ComputeTables>,
  tenantId: string,
  now: Date,
  batchId?: string,
): Promise<void> {
  let query = (batchesDb(db) as BatchesDb)
    .selectFrom('compute.command_batches')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('state', '=', 'pending')
    .where('not_after', '<=', now);
  if (batchId !== undefined) query = query.where('id', '=', batchId);
  for (const { id } of await query.execute()) await expireBatch(db, id, now);
}

/** The job queued at a batch's window end; run early (another replica's clock), it comes back. */
export async function expireBatchJob(context: JobContext): Promise<void> {
  const batchId = String(context.payload.batchId ?? '');
  const outcome = await expireBatch(context.db, batchId, context.now());
  if (outcome === 'not-due') {
    const row = await batchesDb(context.db)
      .selectFrom('compute.command_batches')
      .select('not_after')
      .where('id', '=', batchId)
      .executeTakeFirst();
    if (row)
      await enqueueJob(context.db, { kind: BATCH_EXPIRY_JOB, payload: { batchId }, runAt: row.not_after });
  }
}
