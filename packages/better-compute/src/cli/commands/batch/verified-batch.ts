/**
 * A batch as the approver's commands hold it: read from the server, then verified. Its scope is
 * paged to the end and its root and size recomputed from the leaves (`readScopeFile`, the check
 * `batch sign` runs on a scope file), so nothing is reviewed or signed on the server's word.
 * A page that is malformed, repeats, does not advance, or holds more leaves than the batch is
 * INVALID_RESPONSE; leaves that do not give the batch's root and size are SCOPE_MISMATCH.
 */
import type { CallOutput } from '@better-compute/client';
import type { ApprovalSignature, BatchStatement, ScopeFile, ScopeLeaf } from '@better-compute/core/quorum';
import { ComputeError } from '@better-compute/core';
import { CliError } from '../../errors.js';
import type { CliApi } from '../../transport-types.js';
import { approvalSummaryLines, type ReviewedBatch } from './review.js';

export type Batch = CallOutput<'commandBatches.get'>;

export interface VerifiedBatch {
  /** The batch as the server answered it. */
  batch: Batch;
  /** The batch as `batch show --scope-out` writes it, its leaves checked against its root. */
  scope: ScopeFile;
  /** What an approval of it signs. */
  statement: BatchStatement;
  createdAt: number;
}

/** The most leaves asked for per page: the method's own maximum (MAX_SCOPE_PAGE). */
const PAGE_LIMIT = 5_000;

function invalidResponse(message: string): CliError {
  return new CliError('INVALID_RESPONSE', message, {
    hint: 'Do not approve this batch: the server described it inconsistently. Run the command again, and report the batch if it persists.',
  });
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Reads batch `batchId` and its whole scope, and checks the leaves give its root and size. */
export async function readVerifiedBatch(client: CliApi, batchId: string): Promise<VerifiedBatch> {
  const quorum = await import('@better-compute/core/quorum');
  const batch = await client.call('commandBatches.get', { batchId });
  if (!isRecord(batch) || batch.id !== batchId)
    throw invalidResponse(`the server answered another batch than ${batchId}`);
  if (
    !Array.isArray(batch.approvals) ||
    !Number.isSafeInteger(batch.approvalsNeeded) ||
    typeof batch.state !== 'string'
  )
    throw invalidResponse(`the server's batch ${batchId} has no state, approvals or approvals needed`);
  if (!Number.isSafeInteger(batch.size) || batch.size < 1 || batch.size > quorum.MAX_SCOPE_LEAVES)
    throw invalidResponse(
      `the server's batch ${batchId} has ${String(batch.size)} leaves, not 1 to ${quorum.MAX_SCOPE_LEAVES}`,
    );
  const leaves = await readScopePages(client, batch, quorum.leafProblem);
  const document: ScopeFile = {
    format: quorum.SCOPE_FORMAT,
    batchId: batch.id,
    trustDomain: batch.trustDomain,
    createdAt: batch.createdAt,
    notAfter: batch.notAfter,
    reason: batch.reason,
    proposedBy: batch.proposedBy,
    leaves,
    root: batch.root,
    size: batch.size,
  };
  try {
    const read = quorum.readScopeFile(document);
    return { batch, scope: read.file, statement: read.statement, createdAt: read.createdAt };
  } catch (error) {
    // The fields were the server's, so a malformed one is its answer, not the person's mistake;
    // SCOPE_MISMATCH (the leaves do not give the root and size) passes as it is.
    if (error instanceof ComputeError && error.code === 'INVALID_ARGUMENT')
      throw invalidResponse(`the server's batch ${batchId} is malformed: ${error.message}`);
    throw error;
  }
}

/**
 * Every leaf of the batch's scope, in tree order. Each page must continue exactly where the last
 * ended (its first entry's index is the count so far, and its cursor the index after its last),
 * so a server cannot repeat, skip or loop; the leaves can never outnumber the batch's size.
 */
async function readScopePages(
  client: CliApi,
  batch: Batch,
  leafProblem: (value: unknown) => string | null,
): Promise<ScopeLeaf[]> {
  const leaves: ScopeLeaf[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page: unknown = await client.call('commandBatches.scope', {
      batchId: batch.id,
      limit: PAGE_LIMIT,
      ...(cursor === undefined ? {} : { cursor }),
    });
    const where = `the scope page at leaf ${leaves.length} of ${batch.id}`;
    if (
      !isRecord(page) ||
      !Array.isArray(page.items) ||
      !(page.nextCursor === null || typeof page.nextCursor === 'string')
    )
      throw invalidResponse(`${where} is not { items, nextCursor }`);
    if (page.batchId !== batch.id || page.root !== batch.root || page.size !== batch.size)
      throw invalidResponse(`${where} describes another batch, root or size than the batch itself`);
    if (page.items.length > PAGE_LIMIT)
      throw invalidResponse(
        `${where} holds ${page.items.length} leaves, more than the ${PAGE_LIMIT} asked for`,
      );
    for (const item of page.items) {
      if (!isRecord(item) || item.index !== leaves.length)
        throw invalidResponse(
          `${where} does not continue at leaf ${leaves.length}: it repeats or skips leaves`,
        );
      if (leaves.length >= batch.size)
        throw invalidResponse(
          `the scope of ${batch.id} holds more leaves than the batch's size ${batch.size}`,
        );
      const leaf = { subject: item.subject, kind: item.kind, payload: item.payload };
      const problem = leafProblem(leaf);
      if (problem) throw invalidResponse(`leaf ${leaves.length} of ${batch.id} is malformed: ${problem}`);
      leaves.push(leaf as ScopeLeaf);
    }
    if (page.nextCursor === null) return leaves;
    if (page.items.length === 0 || page.nextCursor !== String(leaves.length))
      throw invalidResponse(
        `${where} does not advance: its next cursor is not the index after its last leaf`,
      );
    cursor = page.nextCursor;
  }
}

/** The batch as the review reads it: its statement, reason, who proposed it and its verified leaves. */
export function reviewedOf(verified: VerifiedBatch): ReviewedBatch {
  const { scope } = verified;
  return {
    statement: verified.statement,
    reason: scope.reason,
    proposedBy: scope.proposedBy,
    leaves: scope.leaves,
  };
}

/** INVALID_STATE unless the batch is still open for approval. */
export function assertPending(batch: Batch): void {
  if (batch.state !== 'pending')
    throw new CliError(
      'INVALID_STATE',
      `batch ${batch.id} is ${batch.state}, not pending: it can no longer be approved`,
      {
        hint: `"better-compute batch show --batch ${batch.id}" shows it; a new batch is needed for these commands.`,
      },
    );
}

/** The summary lines of the guide's `batch approve`, for the batch as verified. */
export function approvalSummaryOf(verified: VerifiedBatch): string[] {
  return approvalSummaryLines(reviewedOf(verified), {
    had: verified.batch.approvals.length,
    needed: verified.batch.approvalsNeeded,
  });
}

/** Submits one approval of the verified batch and says how many it now has. */
export async function submitApproval(
  client: CliApi,
  log: (line: string) => void,
  verified: VerifiedBatch,
  approval: ApprovalSignature,
): Promise<Batch> {
  const approved = await client.call('commandBatches.approve', {
    batchId: verified.batch.id,
    kid: approval.kid,
    signature: approval.signature,
  });
  const had = Array.isArray(approved?.approvals) ? approved.approvals.length : '?';
  log(
    `Approved as ${approval.kid}: approvals ${had} of ${approved?.approvalsNeeded ?? '?'}; the batch is ${approved?.state ?? 'unknown'}.`,
  );
  return approved;
}
