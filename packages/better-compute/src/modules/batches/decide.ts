/**
 * `commandBatches.approve` and `cancel`. An approval is an approver key's signature over the batch
 * as the server holds it (id, root, size, window end, trust domain); it counts once per key of the
 * current approver set. When a threshold of the set has signed, in the same transaction, the batch
 * is approved, the members the control plane carries out (node deletions) are done, the rest are
 * released to the gateways, and `batch.approved` is written. The server signs nothing itself.
 */
import { ComputeError, toComputeError } from '@better-compute/core';
import { approverKeys, verifyApproval, verifyApprovals } from '@better-compute/core/quorum';
import { sql } from 'kysely';
import {
  batchCommands,
  cancelHeldCommands,
  releaseHeldCommands,
  settleHeldCommand,
} from '../commands/queries.js';
import type { CommandRow } from '../commands/tables.js';
import type { CallContext } from '../define-module.js';
import { deleteNode } from '../fleet/nodes.js';
import { type ApproverLoader, requireQuorum } from './approvers.js';
import { CARRIED_KINDS } from './create.js';
import { type BatchRow, batchesDb } from './tables.js';
import { approvalsOf, batchView, loadBatch, stateAt, statementOf } from './views.js';

type BatchInput = { batchId: string };

/** INVALID_STATE unless the batch is pending and its window open at `now`; the message says which. */
function refuseUnlessOpen(row: BatchRow, now: Date, doing: 'approved' | 'cancelled'): void {
  const state = stateAt(row, now);
  if (state === 'pending') return;
  const message =
    state === 'expired'
      ? `batch ${row.id}'s window closed at ${new Date(row.not_after).toISOString()}; it expired before it was approved`
      : `batch ${row.id} is ${state}; only a pending batch is ${doing}`;
  throw new ComputeError('INVALID_STATE', message, {
    details: { id: row.id, state },
    hint:
      state === 'expired'
        ? 'Create the batch again (better-compute batch create) if its commands are still wanted.'
        : `Read it with better-compute batch show --batch ${row.id}.`,
  });
}

export async function approveBatch(
  loader: ApproverLoader,
  ctx: CallContext<BatchInput & { kid: string; signature: string }>,
) {
  const db = batchesDb(ctx.db);
  const row = await loadBatch(db, ctx.tenantId, ctx.input.batchId, true);
  const now = ctx.now();
  refuseUnlessOpen(row, now, 'approved');
  const { set } = await requireQuorum(loader);
  if (row.trust_domain !== set.trustDomain)
    throw new ComputeError(
      'INVALID_STATE',
      `batch ${row.id} was made for trust domain ${row.trust_domain}; this deployment's approvers are for ${set.trustDomain}`,
      { details: { id: row.id }, hint: 'Create the batch again in this deployment.' },
    );
  const { kid, signature } = ctx.input;
  const key = approverKeys(set).get(kid);
  if (!key)
    throw new ComputeError('INVALID_ARGUMENT', `key ${kid} is not in the approver set (epoch ${set.epoch})`, {
      details: { field: 'kid', epoch: set.epoch },
      hint: 'Approve with a key of the current approver set (better-compute batch keygen printed its kid; pki approvers lists the set).',
    });
  const statement = statementOf(row);
  if (!verifyApproval(key, statement, signature))
    throw new ComputeError(
      'SCOPE_MISMATCH',
      `the signature by ${kid} is not over batch ${row.id} as the server holds it (its id, root ${row.root}, size ${row.size}, window end ${new Date(row.not_after).toISOString()} and trust domain ${row.trust_domain})`,
      {
        details: { field: 'signature', root: row.root, size: row.size },
        hint: `Review the batch again and sign what it shows: better-compute batch approve --batch ${row.id} --key KEY, or batch show --scope-out and batch sign offline.`,
      },
    );
  const before = await approvalsOf(db, [row.id]);
  if (before.some((approval) => approval.kid === kid))
    throw new ComputeError('ALREADY_EXISTS', `key ${kid} has approved batch ${row.id} already`, {
      details: { id: row.id, kid },
      hint: 'Another approver of the set signs it; one key counts once.',
    });
  const approval = await db
    .insertInto('compute.command_batch_approvals')
    .values({
      batch_id: row.id,
      kid,
      signature,
      approver: ctx.identity!.principalId,
      epoch: set.epoch,
      at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  const approvals = [...before, approval];
  // Counted as a daemon counts them: keys of the current set only, each once, over this statement.
  const verdict = verifyApprovals(set, statement, approvals, now.getTime());
  ctx.emit({
    type: 'batch.approval_added',
    subject: { type: 'batch', id: row.id },
    data: { kid, approvals: verdict.approvedBy.length, approvalsNeeded: set.threshold },
  });
  if (!verdict.ok) {
    const updated =
      row.approvals_needed === set.threshold
        ? row
        : await db
            .updateTable('compute.command_batches')
            .set({ approvals_needed: set.threshold })
            .where('id', '=', row.id)
            .returningAll()
            .executeTakeFirstOrThrow();
    return batchView(updated, approvals, now);
  }
  const carried = await carryOut(ctx, await batchCommands(ctx.db, row.id), now);
  const released = await releaseHeldCommands(ctx.db, row.id);
  const updated = await db
    .updateTable('compute.command_batches')
    .set({ state: 'approved', approved_at: now, approvals_needed: set.threshold })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({
    type: 'batch.approved',
    subject: { type: 'batch', id: row.id },
    data: {
      size: row.size,
      approvalsNeeded: set.threshold,
      approvedBy: verdict.approvedBy,
      released,
      carriedOut: carried,
    },
  });
  return batchView(updated, approvals, now);
}

/**
 * Carries out the held members that are the control plane's own (node deletions), each under the
 * same rules as nodes.delete. One that is refused ends failed with why; the others go on, each
 * behind a savepoint so a refused one leaves nothing behind.
 */
async function carryOut(
  ctx: CallContext<unknown>,
  members: readonly CommandRow[],
  now: Date,
): Promise<number> {
  let done = 0;
  for (const member of members) {
    if (!member.held || member.state !== 'queued' || CARRIED_KINDS[member.kind] !== 'control-plane') continue;
    await sql`savepoint batch_member`.execute(ctx.db);
    try {
      const deleted = await deleteNode({ ...ctx, input: { nodeId: member.node_id } });
      await sql`release savepoint batch_member`.execute(ctx.db);
      await settleHeldCommand(ctx.db, member.id, { state: 'succeeded', error: null, result: deleted }, now);
      done += 1;
    } catch (error) {
      // A refusal of the fleet's rules is the member's outcome; anything else fails the approval,
      // as it would fail nodes.delete (and a transient one runs the whole transaction again).
      if (!(error instanceof ComputeError)) throw error;
      await sql`rollback to savepoint batch_member`.execute(ctx.db);
      const refusal = toComputeError(error);
      await settleHeldCommand(
        ctx.db,
        member.id,
        { state: 'failed', error: `${refusal.code}: ${refusal.message}`, result: null },
        now,
      );
    }
  }
  return done;
}

export async function cancelBatch(ctx: CallContext<BatchInput>) {
  const db = batchesDb(ctx.db);
  const row = await loadBatch(db, ctx.tenantId, ctx.input.batchId, true);
  const now = ctx.now();
  refuseUnlessOpen(row, now, 'cancelled');
  const cancelled = await cancelHeldCommands(ctx.db, row.id, now, 'its batch was cancelled');
  const updated = await db
    .updateTable('compute.command_batches')
    .set({ state: 'cancelled', ended_at: now })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({
    type: 'batch.cancelled',
    subject: { type: 'batch', id: row.id },
    data: { size: row.size, approvalsNeeded: row.approvals_needed, cancelledCommands: cancelled },
  });
  return batchView(updated, await approvalsOf(db, [row.id]), now);
}
