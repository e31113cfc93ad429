/**
 * Approvals: an approver's P-256 signature over one batch (its id, root, size, window end and the
 * deployment's trust domain), and the quorum check that counts them against an approver set. What
 * is signed is rebuilt from the batch the verifier holds, never taken from the approval, so an
 * approval of another batch, root, size, window or deployment simply does not verify.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { ComputeError } from '../errors.js';
import { sameHash } from '../merkle.js';
import { ByteWriter, fromBase64url, toBase64url, toHex } from './bytes.js';
import { keyId, SIGNATURE_BYTES, signP256, verifyP256 } from './keys.js';
import { type ApproverSet, approverKeys } from './approver-set.js';
import { type BatchStatement, parseStatementFields } from './scope.js';

/** Domain separation: no other message of the project starts with these bytes. */
const APPROVAL_CONTEXT = 'better-compute/batch-approval/v1';

/** The bytes an approval signs. */
export function approvalMessage(batch: BatchStatement): Uint8Array {
  return new ByteWriter()
    .text(APPROVAL_CONTEXT)
    .text(batch.trustDomain)
    .text(batch.batchId)
    .fixed(batch.root)
    .u64(batch.size)
    .u64(batch.notAfter)
    .finish();
}

/** One approval as the server keeps it and the gateway sends it: the key's id and the signature. */
export interface ApprovalSignature {
  kid: string;
  /** Unpadded base64url of the 64-byte P1363 signature. */
  signature: string;
}

export function signApproval(privateKey: KeyObject, batch: BatchStatement): ApprovalSignature {
  return {
    kid: keyId(createPublicKey(privateKey)),
    signature: toBase64url(signP256(privateKey, approvalMessage(batch))),
  };
}

/** Whether one approval is `publicKey`'s signature over `batch`. Never throws. */
export function verifyApproval(publicKey: KeyObject, batch: BatchStatement, signature: string): boolean {
  const bytes = fromBase64url(signature, SIGNATURE_BYTES);
  return bytes !== null && verifyP256(publicKey, approvalMessage(batch), bytes);
}

export interface QuorumResult {
  /** A threshold of distinct approvers of the set signed this batch, inside its window. */
  ok: boolean;
  /** The set's threshold. */
  needed: number;
  /** The kids whose approval counted, each once. */
  approvedBy: string[];
  /** Why each approval that did not count was refused. */
  refused: { kid: string; reason: string }[];
  /** Why the batch as a whole cannot be approved (another trust domain, an expired window), if so. */
  reason?: string;
}

/**
 * The quorum check, the same on the server, in the CLI and in the daemon: counts distinct valid
 * approvals by keys of `set`, at instant `now` (milliseconds). A batch of another trust domain than
 * the set's, or whose window has closed, counts none.
 */
export function verifyApprovals(
  set: ApproverSet,
  batch: BatchStatement,
  approvals: readonly ApprovalSignature[],
  now: number,
): QuorumResult {
  const result: QuorumResult = { ok: false, needed: set.threshold, approvedBy: [], refused: [] };
  if (batch.trustDomain !== set.trustDomain)
    return {
      ...result,
      reason: `the batch is for trust domain ${batch.trustDomain}, the approver set for ${set.trustDomain}`,
    };
  if (!(now < batch.notAfter))
    return { ...result, reason: `the batch's window closed at ${new Date(batch.notAfter).toISOString()}` };
  const keys = approverKeys(set);
  const counted = new Set<string>();
  for (const approval of approvals) {
    const kid = typeof approval?.kid === 'string' ? approval.kid.slice(0, 64) : '';
    const key = keys.get(kid);
    if (!key) result.refused.push({ kid, reason: 'the key is not in the approver set' });
    else if (counted.has(kid)) result.refused.push({ kid, reason: 'a second approval by the same key' });
    else if (!verifyApproval(key, batch, approval.signature))
      result.refused.push({
        kid,
        reason: 'the signature is not over this batch, root, size, window and trust domain',
      });
    else {
      counted.add(kid);
      result.approvedBy.push(kid);
    }
  }
  result.ok = result.approvedBy.length >= set.threshold;
  return result;
}

/** The approval file's format tag: what `batch sign` writes and `batch approve --signature` reads. */
export const APPROVAL_FORMAT = 'better-compute.batch-approval/v1';

/** An approval made offline, with the batch it says it signs, so a mix-up is caught before submitting. */
export interface ApprovalFile extends ApprovalSignature {
  format: typeof APPROVAL_FORMAT;
  batchId: string;
  trustDomain: string;
  root: string;
  size: number;
  notAfter: string;
}

export function approvalFile(batch: BatchStatement, approval: ApprovalSignature): ApprovalFile {
  return {
    format: APPROVAL_FORMAT,
    batchId: batch.batchId,
    trustDomain: batch.trustDomain,
    root: toHex(batch.root),
    size: batch.size,
    notAfter: new Date(batch.notAfter).toISOString(),
    kid: approval.kid,
    signature: approval.signature,
  };
}

/**
 * Reads an approval file for `batch`: SCOPE_MISMATCH when it names another batch, root, size,
 * window or trust domain, or its signature is not over this batch by the key it names.
 */
export function readApprovalFile(
  document: unknown,
  batch: BatchStatement,
  publicKeyOf: (kid: string) => KeyObject | undefined,
): ApprovalSignature {
  const invalid = (message: string) =>
    new ComputeError('INVALID_ARGUMENT', message, {
      hint: 'Give the file "better-compute batch sign" wrote, unchanged.',
    });
  if (typeof document !== 'object' || document === null || Array.isArray(document))
    throw invalid('the approval file is not a JSON object');
  const value = document as Record<string, unknown>;
  if (value.format !== APPROVAL_FORMAT) throw invalid(`the approval file is not ${APPROVAL_FORMAT}`);
  const signed = parseStatementFields(value);
  if (typeof value.kid !== 'string' || typeof value.signature !== 'string')
    throw invalid('the approval file has no kid and signature');
  const mismatch = (what: string) =>
    new ComputeError('SCOPE_MISMATCH', `the approval signs ${what}`, {
      hint: 'Sign this batch: write its scope with "batch show --scope-out" and run "batch sign" on it.',
    });
  if (signed.batchId !== batch.batchId) throw mismatch(`batch ${signed.batchId}, not ${batch.batchId}`);
  if (signed.trustDomain !== batch.trustDomain)
    throw mismatch(`trust domain ${signed.trustDomain}, not ${batch.trustDomain}`);
  if (!sameHash(signed.root, batch.root) || signed.size !== batch.size)
    throw mismatch('another root or size than the batch has');
  if (signed.notAfter !== batch.notAfter) throw mismatch('another window than the batch has');
  const key = publicKeyOf(value.kid);
  if (key && !verifyApproval(key, batch, value.signature))
    throw mismatch('nothing: its signature does not verify under its key');
  return { kid: value.kid, signature: value.signature };
}
