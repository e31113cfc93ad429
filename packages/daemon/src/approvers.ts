/**
 * Which approvers a daemon trusts, and its check of every destructive command against them. Like
 * the command root (command-root.ts), the approver set is pinned on first use, from the first
 * `welcome` whose chain verifies, and then changes only along the chain's signed epoch statements:
 * a control plane that drops the chain, sends a chain that does not hold the pin, or a change
 * signed by too few of the current approvers changes nothing. A destructive command runs only with
 * a threshold of the pinned set's approvals over a batch whose scope holds exactly it, and each
 * approved leaf runs once on this node. docs/quorum.md, docs/decisions/batch-daemon.md.
 */
import type { CommandEnvelope } from '@better-compute/core';
import {
  type ApproverSet,
  approverSetDigest,
  checkCommandQuorum,
  followApproverChain,
  readApproverSet,
} from '@better-compute/core/quorum';
import { safe } from './http.js';
import type { StateDir } from './state.js';

export type ApproverDecision =
  /** No chain and nothing pinned: a deployment without the quorum. */
  | { kind: 'none' }
  /** Nothing was pinned; the chain's newest set is, now. */
  | { kind: 'pinned'; set: ApproverSet }
  /** The chain ends at the pinned set. */
  | { kind: 'same' }
  /** The chain leads, step by signed step, from the pinned set to a newer one. */
  | { kind: 'adopted'; set: ApproverSet }
  /** The pin stays; why the chain was not followed (or that none came). */
  | { kind: 'kept'; reason: string };

/**
 * Decides on the approver chain a gateway sent (`welcome.approverSets`), given the set pinned, if
 * any, and the trust domain the gateway said it serves (`welcome.trustDomain`, may be absent).
 */
export function decideApproverSet(
  pinned: ApproverSet | null,
  chain: unknown,
  trustDomain: unknown,
): ApproverDecision {
  if (chain === undefined || chain === null || (Array.isArray(chain) && chain.length === 0))
    return pinned
      ? { kind: 'kept', reason: 'the gateway sent no approver set, and an empty chain never unpins one' }
      : { kind: 'none' };
  const verdict = followApproverChain(pinned, chain);
  if (!verdict.ok) return { kind: 'kept', reason: verdict.reason };
  if (pinned && approverSetDigest(verdict.set) === approverSetDigest(pinned)) return { kind: 'same' };
  // A chain's steps all keep its first set's trust domain; the first pin is the one place a set for
  // another deployment could come in.
  if (!pinned && typeof trustDomain === 'string' && verdict.set.trustDomain !== trustDomain)
    return {
      kind: 'kept',
      reason: `the approver chain is for trust domain ${verdict.set.trustDomain}, and the gateway serves ${trustDomain.slice(0, 253)}`,
    };
  return pinned ? { kind: 'adopted', set: verdict.set } : { kind: 'pinned', set: verdict.set };
}

/**
 * The pinned set, checked again as it is read: null when none was pinned. A file that is there but
 * not a set throws, so a damaged pin is never taken for "none" and replaced by whatever the next
 * gateway sends.
 */
export function pinnedApproverSet(state: StateDir): ApproverSet | null {
  const saved = state.pinnedApprovers();
  if (saved === null) return null;
  try {
    return readApproverSet(saved.set, 'the pinned approver set');
  } catch (error) {
    throw new Error(
      `${state.dir}/approvers.json holds no approver set (${(error as Error).message}); restore it from the deployment's published chain`,
    );
  }
}

/** Follows the chain a `welcome` carried: pins, adopts or keeps, and logs which and why. */
export function followWelcomeApprovers(
  state: StateDir,
  welcome: { approverSets?: unknown; trustDomain?: unknown },
  log: (line: string) => void,
): void {
  let pinned: ApproverSet | null;
  try {
    pinned = pinnedApproverSet(state);
  } catch (error) {
    log(`bcd: followed no approver chain: ${safe((error as Error).message)}`);
    return;
  }
  const decision = decideApproverSet(pinned, welcome.approverSets, welcome.trustDomain);
  const at = new Date().toISOString();
  switch (decision.kind) {
    case 'pinned':
      state.savePinnedApprovers({ set: decision.set, pinnedAt: at });
      log(
        `bcd: pinned the approver set of epoch ${decision.set.epoch} (${decision.set.threshold} of ${decision.set.approvers.length})`,
      );
      return;
    case 'adopted':
      state.savePinnedApprovers({ set: decision.set, pinnedAt: at });
      log(
        `bcd: followed the signed approver-set change from epoch ${pinned!.epoch} to ${decision.set.epoch} (${decision.set.threshold} of ${decision.set.approvers.length})`,
      );
      return;
    case 'kept':
      log(
        pinned
          ? `bcd: kept the pinned approver set of epoch ${pinned.epoch}: ${safe(decision.reason)}`
          : `bcd: pinned no approver set, so destructive commands will be refused: ${safe(decision.reason)}`,
      );
      return;
    case 'same':
    case 'none':
      return;
  }
}

/** How many approved leaves may be open on one node at once; far past any real batch plan. */
const MAX_USED_LEAVES = 10_000;
/** The longest refusal reason kept in a command's result and the log. */
const MAX_REASON = 500;

/**
 * The daemon's check of a destructive command, after its signature, node, expiry and kind were
 * checked (commands.ts `refusal`): a threshold of the pinned set's approvals over a batch whose
 * scope holds exactly this command, inside the batch's window, and a leaf this node has not run
 * for another command. On success the leaf is recorded as used (synced to disk) before the command
 * is queued, so a second command citing it is refused even across a restart. Answers why the
 * command may not run, or null. Never throws.
 */
export function quorumRefusal(
  state: StateDir,
  command: CommandEnvelope,
  quorum: unknown,
  now: number,
): string | null {
  const bounded = (reason: string) => safe(reason).slice(0, MAX_REASON);
  let pinned: ApproverSet | null;
  try {
    pinned = pinnedApproverSet(state);
  } catch {
    return 'the pinned approver set on this node is unreadable, so no destructive command runs';
  }
  const check = checkCommandQuorum(pinned, command, quorum, now);
  if (check.refusal !== null || !check.batch)
    return bounded(check.refusal ?? 'the batch statement is missing');
  const index = (quorum as { index: number }).index;
  const leaf = `${check.batch.batchId}#${index}`;
  try {
    // Entries whose window has closed can no longer be replayed (the check above refuses them).
    const used = Object.fromEntries(
      Object.entries(state.usedLeaves()).filter(([, entry]) => Date.parse(entry.notAfter) > now),
    );
    const earlier = used[leaf];
    if (earlier && earlier.commandId !== command.id)
      return bounded(
        `leaf ${index} of batch ${check.batch.batchId} already ran on this node as ${earlier.commandId}; an approval runs its command once`,
      );
    if (!earlier) {
      if (Object.keys(used).length >= MAX_USED_LEAVES)
        return `this node holds ${MAX_USED_LEAVES} approved commands whose windows are still open; it takes no more until they close`;
      used[leaf] = { commandId: command.id, notAfter: new Date(check.batch.notAfter).toISOString() };
      state.saveUsedLeaves(used);
    }
  } catch (error) {
    // Without a record of the leaves already run, running this one could be a replay.
    return bounded(`the record of approved commands already run is unusable: ${(error as Error).message}`);
  }
  return null;
}
