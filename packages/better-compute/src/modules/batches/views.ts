/**
 * Batches as the API answers them, and the reads every method shares: a batch of the caller's
 * tenant (another tenant's reads as absent), its approvals, and the statement approvers sign.
 */
import { ComputeError } from '@better-compute/core';
import { type BatchStatement, fromHex } from '@better-compute/core/quorum';
import type { CommandRow } from '../commands/tables.js';
import type { ApprovalRow, BatchesDb, BatchRow, BatchState } from './tables.js';

const iso = (value: Date | string) => new Date(value).toISOString();
const isoOrNull = (value: Date | string | null) => (value === null ? null : iso(value));

/** What a member reads as when its batch expired before it was approved. */
export const EXPIRED_MEMBER_ERROR = 'the batch expired before it was approved';

/** A pending batch whose window has closed is expired, whether or not that was written yet. */
export function stateAt(row: Pick<BatchRow, 'state' | 'not_after'>, now: Date): BatchState {
  return row.state === 'pending' && new Date(row.not_after).getTime() <= now.getTime()
    ? 'expired'
    : row.state;
}

export function batchView(row: BatchRow, approvals: readonly ApprovalRow[], now: Date) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    state: stateAt(row, now),
    reason: row.reason,
    createdBy: row.created_by,
    createdByAgent: row.created_by_agent,
    delegationId: row.delegation_id,
    proposedBy: row.proposed_by,
    trustDomain: row.trust_domain,
    root: row.root,
    size: row.size,
    epoch: row.epoch,
    kinds: row.kinds,
    approvals: approvals.map((approval) => ({
      kid: approval.kid,
      approver: approval.approver,
      at: iso(approval.at),
    })),
    approvalsNeeded: row.approvals_needed,
    createdAt: iso(row.created_at),
    notAfter: iso(row.not_after),
    approvedAt: isoOrNull(row.approved_at),
    endedAt: isoOrNull(row.ended_at),
  };
}

/** What approvers sign about the batch, from what the server holds (never from a caller). */
export function statementOf(
  row: Pick<BatchRow, 'id' | 'trust_domain' | 'root' | 'size' | 'not_after'>,
): BatchStatement {
  return {
    batchId: row.id,
    trustDomain: row.trust_domain,
    root: fromHex(row.root, 32)!,
    size: row.size,
    notAfter: new Date(row.not_after).getTime(),
  };
}

export function memberView(row: CommandRow) {
  return {
    commandId: row.id,
    index: row.batch_index!,
    nodeId: row.node_id,
    kind: row.kind,
    payload: row.payload,
    state: row.state,
    awaitingApproval: row.held,
    error: row.error,
    finishedAt: isoOrNull(row.finished_at),
  };
}

function batchNotFound(id: string): ComputeError {
  return new ComputeError('NOT_FOUND', `batch ${id} does not exist`, {
    details: { id },
    hint: 'List the tenant’s batches with better-compute batch list.',
  });
}

/** A batch of the tenant; NOT_FOUND for any other (another tenant's included, in the same words). */
export async function loadBatch(
  db: BatchesDb,
  tenantId: string,
  id: string,
  forUpdate = false,
): Promise<BatchRow> {
  let query = db
    .selectFrom('compute.command_batches')
    .selectAll()
    .where('id', '=', id)
    .where('tenant_id', '=', tenantId);
  if (forUpdate) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) throw batchNotFound(id);
  return row;
}

/** The approvals of some batches, oldest first. */
export async function approvalsOf(db: BatchesDb, batchIds: readonly string[]): Promise<ApprovalRow[]> {
  if (batchIds.length === 0) return [];
  return db
    .selectFrom('compute.command_batch_approvals')
    .selectAll()
    .where('batch_id', 'in', batchIds)
    .orderBy('at')
    .orderBy('kid')
    .execute();
}
