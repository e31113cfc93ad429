/**
 * What travels with a batch's command from the gateway to the daemon, and the daemon's check of it.
 * The gateway adds `quorum` beside the signed command: the batch statement, the leaf's index and
 * inclusion proof, and the approvals. The daemon never reads the leaf from the message: it rebuilds
 * it from the command it was sent (its node, kind and payload), so a leaf proof for another
 * operation proves nothing. Then the approvals must reach the threshold of the approver set the
 * daemon pinned, inside the batch's window. A destructive command without a valid quorum is refused,
 * whatever the database says. docs/quorum.md.
 */
import type { CommandEnvelope } from '../command-envelope.js';
import { HASH_SIZE, leafHash, verifyInclusion } from '../merkle.js';
import { type ApprovalSignature, verifyApprovals } from './approvals.js';
import type { ApproverSet } from './approver-set.js';
import { fromHex, toHex } from './bytes.js';
import { BMC_POWER_KIND, bmcEndpoint, destructiveKind, leafProblem, type ScopeLeaf } from './kinds.js';
import { type BatchStatement, isTrustDomain, leafBytes } from './scope.js';

/** The most proof hashes a tree of MAX_SCOPE_LEAVES leaves needs, with room. */
const MAX_PROOF = 64;
const MAX_APPROVALS = 64;

/** The `quorum` field of a gateway's `command` message. */
export interface CommandQuorum {
  batch: { batchId: string; trustDomain: string; root: string; size: number; notAfter: string };
  /** The leaf's position in the batch's tree. */
  index: number;
  /** The RFC 6962 inclusion proof of the leaf, lowercase hex hashes. */
  proof: string[];
  /** Whether the leaf admits any payload of its kind (then the command's payload is not bound). */
  unbound: boolean;
  approvals: ApprovalSignature[];
}

/** The BMC actions a site agent runs only with a batch's approvals (on and status change nothing). */
const BMC_DESTRUCTIVE_ACTIONS: readonly unknown[] = ['off', 'reset'];

/**
 * Whether a command runs only with its batch's approvals: every destructive kind, and a metal.bmc
 * that powers a machine off or resets it (its leaf is a metal.bmc-power, see commandLeaf).
 */
export function needsQuorum(command: Pick<CommandEnvelope, 'kind' | 'payload'>): boolean {
  if (destructiveKind(command.kind)) return true;
  const payload = command.payload as Record<string, unknown> | null | undefined;
  return (
    command.kind === 'metal.bmc' &&
    typeof payload === 'object' &&
    payload !== null &&
    BMC_DESTRUCTIVE_ACTIONS.includes(payload.action)
  );
}

/**
 * The leaf a command is: its node, kind and payload (or null for an unbound leaf). A metal.bmc is
 * the leaf of the machine it powers, not of the site agent it runs on: subject the payload's
 * machine, kind metal.bmc-power, and the action, this node as the runner and the BMC it addresses,
 * all read from the command itself.
 */
export function commandLeaf(
  command: Pick<CommandEnvelope, 'nodeId' | 'kind' | 'payload'>,
  unbound: boolean,
): ScopeLeaf {
  if (command.kind === 'metal.bmc') {
    const payload = (command.payload ?? {}) as Record<string, unknown>;
    return {
      subject: payload.machineId as string,
      kind: BMC_POWER_KIND,
      payload: unbound
        ? null
        : {
            action: payload.action as string,
            runner: command.nodeId,
            bmc: bmcEndpoint(payload.bmc),
          },
    };
  }
  return {
    subject: command.nodeId,
    kind: command.kind,
    payload: unbound ? null : (command.payload as Record<string, string>),
  };
}

/** The gateway's side: the attachment for a member command, from what the batch holds. */
export function commandQuorum(
  batch: BatchStatement,
  leaf: { index: number; proof: readonly Uint8Array[]; unbound: boolean },
  approvals: readonly ApprovalSignature[],
): CommandQuorum {
  return {
    batch: {
      batchId: batch.batchId,
      trustDomain: batch.trustDomain,
      root: toHex(batch.root),
      size: batch.size,
      notAfter: new Date(batch.notAfter).toISOString(),
    },
    index: leaf.index,
    proof: leaf.proof.map(toHex),
    unbound: leaf.unbound,
    approvals: approvals.map(({ kid, signature }) => ({ kid, signature })),
  };
}

export interface QuorumCheck {
  /** The batch statement the approvals were checked over, when the attachment was well formed. */
  batch?: BatchStatement;
  /** Why the command may not run, or null when a threshold of the set approved it. */
  refusal: string | null;
}

/**
 * The daemon's check: may this destructive command run? `set` is the approver set the daemon
 * pinned (after following signed epoch changes); `now` in milliseconds.
 */
export function checkCommandQuorum(
  set: ApproverSet | null,
  command: CommandEnvelope,
  quorum: unknown,
  now: number,
): QuorumCheck {
  if (!needsQuorum(command))
    return { refusal: `${String(command.kind).slice(0, 64)} is not a destructive kind` };
  if (!set) return { refusal: 'no approver set is pinned on this node, so no destructive command runs' };
  if (typeof quorum !== 'object' || quorum === null || Array.isArray(quorum))
    return {
      refusal: `a ${command.kind} command runs only with its batch's approvals, and none came with it`,
    };
  const q = quorum as Record<string, unknown>;
  const b = (typeof q.batch === 'object' && q.batch !== null ? q.batch : {}) as Record<string, unknown>;
  const root = fromHex(b.root, HASH_SIZE);
  const notAfter = typeof b.notAfter === 'string' ? Date.parse(b.notAfter) : Number.NaN;
  if (
    typeof b.batchId !== 'string' ||
    b.batchId.length > 80 ||
    !isTrustDomain(b.trustDomain) ||
    !root ||
    !Number.isSafeInteger(b.size) ||
    (b.size as number) < 1 ||
    !Number.isFinite(notAfter)
  )
    return { refusal: 'the batch statement that came with the command is malformed' };
  const batch: BatchStatement = {
    batchId: b.batchId,
    trustDomain: b.trustDomain,
    root,
    size: b.size as number,
    notAfter,
  };
  const proof =
    Array.isArray(q.proof) && q.proof.length <= MAX_PROOF ? q.proof.map((h) => fromHex(h, HASH_SIZE)) : null;
  if (
    !proof ||
    proof.some((h) => h === null) ||
    !Number.isSafeInteger(q.index) ||
    typeof q.unbound !== 'boolean'
  )
    return { batch, refusal: 'the leaf proof that came with the command is malformed' };
  const leaf = commandLeaf(command, q.unbound);
  const problem = leafProblem(leaf);
  if (problem) return { batch, refusal: `the command is not a leaf a batch can hold: ${problem}` };
  const included = verifyInclusion(
    q.index as number,
    batch.size,
    leafHash(leafBytes(leaf)),
    proof as Uint8Array[],
    root,
  );
  if (!included.ok)
    return { batch, refusal: `the command is not in batch ${batch.batchId}'s scope: ${included.reason}` };
  const approvals = Array.isArray(q.approvals)
    ? (q.approvals.slice(0, MAX_APPROVALS) as ApprovalSignature[])
    : [];
  const verdict = verifyApprovals(set, batch, approvals, now);
  if (verdict.reason) return { batch, refusal: verdict.reason };
  if (!verdict.ok)
    return {
      batch,
      refusal: `batch ${batch.batchId} has ${verdict.approvedBy.length} valid approval(s) of the ${verdict.needed} the pinned approver set (epoch ${set.epoch}) needs`,
    };
  return { batch, refusal: null };
}
