/**
 * `commandBatches.create`: a batch of destructive commands from `{ subject, kind, payload }` leaves.
 * Each leaf is checked as its kind's message, the leaves' RFC 6962 root is what approvers will
 * sign, and each leaf becomes one member command, held in compute.commands with its inclusion
 * proof until the batch is approved. One transaction: the batch, its leaves, its members, the job
 * that ends it when its window closes, and its event.
 */
import { ComputeError, type Identity, newId, ownerOf } from '@better-compute/core';
import { inclusionProof, MerkleLevels } from '@better-compute/core/merkle';
import {
  BMC_POWER_KIND,
  isWellFormedText,
  leafProblem,
  type LeafPayload,
  type ScopeLeaf,
  scopeLeafHash,
  toHex,
} from '@better-compute/core/quorum';
import { enqueueJob } from '../../workers/jobs.js';
import { type HeldCommand, insertHeldCommands } from '../commands/queries.js';
import type { CallContext } from '../define-module.js';
import { findNode } from '../fleet/queries.js';
import { bmcPowerMember } from '../metal/index.js';
import {
  type ApproverLoader,
  type ApproverSettings,
  createApproverLoader,
  requireQuorum,
} from './approvers.js';
import { BATCH_EXPIRY_JOB } from './expiry.js';
import { batchesDb, type KindCount } from './tables.js';
import { batchView } from './views.js';

/**
 * The destructive kinds this deployment carries out, and by whom: the node's daemon runs a power
 * action; a machine's BMC power is run by the site agent the leaf names (a metal.bmc, the metal
 * module's bmcPowerMember); a node's deletion is the control plane's own, done when the batch is
 * approved. A kind nothing carries out yet is refused rather than held for ever.
 */
export const CARRIED_KINDS: Readonly<Record<string, 'daemon' | 'site-agent' | 'control-plane'>> = {
  'metal.power': 'daemon',
  [BMC_POWER_KIND]: 'site-agent',
  'node.delete': 'control-plane',
};

interface LeafInput {
  subject: string;
  kind: string;
  payload: LeafPayload | null;
  runWith?: LeafPayload | undefined;
}

function invalidLeaf(index: number, message: string, hint?: string): ComputeError {
  return new ComputeError('INVALID_ARGUMENT', `leaf ${index}: ${message}`, {
    details: { field: `leaves.${index}` },
    hint:
      hint ??
      'Each leaf is { subject, kind, payload } with a node id and its kind’s payload (docs/quorum.md).',
  });
}

/** The leaf as it is hashed, and the payload its command runs with (runWith for an unbound leaf). */
function checkLeaf(leaf: LeafInput, index: number): { scoped: ScopeLeaf; runs: LeafPayload } {
  const scoped = { subject: leaf.subject, kind: leaf.kind, payload: leaf.payload };
  const problem = leafProblem(scoped);
  if (problem) throw invalidLeaf(index, problem);
  if (scoped.payload === null) {
    if (leaf.runWith === undefined)
      throw invalidLeaf(
        index,
        `the leaf is unbound (its payload is null), so it needs runWith: the ${leaf.kind} payload its command runs with`,
      );
    const runProblem = leafProblem({ ...scoped, payload: leaf.runWith });
    if (runProblem) throw invalidLeaf(index, `runWith: ${runProblem}`);
  } else if (leaf.runWith !== undefined) {
    throw invalidLeaf(
      index,
      'runWith is for an unbound leaf only; this leaf’s command runs with its payload',
      'Leave runWith out, or make the payload null.',
    );
  }
  if (!CARRIED_KINDS[leaf.kind])
    throw new ComputeError(
      'UNSUPPORTED',
      `leaf ${index}: nothing in this deployment carries out ${leaf.kind} yet, so a batch cannot hold it`,
      {
        details: { field: `leaves.${index}`, kind: leaf.kind },
        hint: `Batches hold ${Object.keys(CARRIED_KINDS).join(' and ')} today.`,
      },
    );
  return { scoped, runs: { ...(scoped.payload ?? leaf.runWith!) } };
}

/** Who proposed the batch, as approvers read it (the guide's `proposedBy`). */
function proposerOf(identity: Identity) {
  if (identity.principalKind === 'agent' && identity.actingFor) {
    // The agent's delegation (IAM's dlg_…); an IAM without delegations names none.
    const delegationId = identity.delegation?.id ?? null;
    return {
      createdBy: ownerOf(identity),
      createdByAgent: identity.principalId,
      delegationId,
      proposedBy: `Proposed by agent ${identity.principalId} for ${identity.actingFor} (delegation ${delegationId ?? 'none'}): the reason is the agent's own text.`,
    };
  }
  const shown =
    identity.email !== undefined && isWellFormedText(identity.email, 320)
      ? identity.email
      : identity.principalId;
  return { createdBy: identity.principalId, createdByAgent: null, delegationId: null, proposedBy: shown };
}

/** Each kind and how many leaves it has, by kind name. */
function kindCounts(leaves: readonly { kind: string }[]): KindCount[] {
  const counts = new Map<string, number>();
  for (const leaf of leaves) counts.set(leaf.kind, (counts.get(leaf.kind) ?? 0) + 1);
  return [...counts].sort(([a], [b]) => (a < b ? -1 : 1)).map(([kind, count]) => ({ kind, count }));
}

export async function createBatch(
  loader: ApproverLoader,
  ctx: CallContext<{ reason: string; leaves: LeafInput[]; hours: number }>,
) {
  const { reason, hours } = ctx.input;
  // The reason is what approvers read first, printed and written to the scope file they sign from.
  if (!isWellFormedText(reason, 500))
    throw new ComputeError(
      'INVALID_ARGUMENT',
      'the reason must be one line of text, without control characters',
      {
        details: { field: 'reason' },
        hint: 'Say in one line why these commands should run.',
      },
    );
  const quorum = await requireQuorum(loader);
  const checked = ctx.input.leaves.map(checkLeaf);

  // Every subject is a node of the caller's tenant; another tenant's reads as absent. A BMC power
  // leaf's subject is a machine, checked (with its runner and BMC) by the metal module below.
  const nodeSubjects = checked.filter(({ scoped }) => CARRIED_KINDS[scoped.kind] !== 'site-agent');
  for (const nodeId of new Set(nodeSubjects.map(({ scoped }) => scoped.subject))) {
    const node = await findNode(ctx.db, nodeId, ctx.tenantId);
    if (!node)
      throw new ComputeError('NOT_FOUND', `node ${nodeId} does not exist`, { details: { id: nodeId } });
    const byDaemon = checked.some(
      ({ scoped }) => scoped.subject === nodeId && CARRIED_KINDS[scoped.kind] === 'daemon',
    );
    if (byDaemon && node.state === 'retired')
      throw new ComputeError('INVALID_STATE', `node ${nodeId} is retired; it runs no commands`, {
        details: { id: nodeId, state: node.state },
        hint: 'Leave retired nodes out of the batch.',
      });
  }

  // What each member runs, and where: the leaf's own node and payload, or for BMC power the
  // metal.bmc the runner sends to the machine's BMC.
  const carriers = [];
  for (const [index, { scoped, runs }] of checked.entries())
    carriers.push(
      CARRIED_KINDS[scoped.kind] === 'site-agent'
        ? await bmcPowerMember(ctx.db, ctx.tenantId, { subject: scoped.subject, payload: runs }, index)
        : { nodeId: scoped.subject, kind: scoped.kind, payload: runs as Record<string, unknown> },
    );

  const levels = new MerkleLevels(checked.map(({ scoped }) => scopeLeafHash(scoped)));
  const size = checked.length;
  const root = toHex(levels.root(0, size));
  const now = ctx.now();
  const notAfter = new Date(now.getTime() + hours * 3_600_000);
  const id = newId('batch');
  const proposer = proposerOf(ctx.identity!);
  const kinds = kindCounts(checked.map(({ scoped }) => scoped));
  const db = batchesDb(ctx.db);
  const row = await db
    .insertInto('compute.command_batches')
    .values({
      id,
      tenant_id: ctx.tenantId,
      state: 'pending',
      reason,
      created_by: proposer.createdBy,
      created_by_agent: proposer.createdByAgent,
      delegation_id: proposer.delegationId,
      proposed_by: proposer.proposedBy,
      trust_domain: quorum.trustDomain,
      root,
      size,
      epoch: quorum.set.epoch,
      kinds: JSON.stringify(kinds),
      approvals_needed: quorum.set.threshold,
      created_at: now,
      not_after: notAfter,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  await db
    .insertInto('compute.command_batch_leaves')
    .values(
      checked.map(({ scoped }, idx) => ({
        batch_id: id,
        idx,
        subject: scoped.subject,
        kind: scoped.kind,
        payload: scoped.payload === null ? null : JSON.stringify(scoped.payload),
      })),
    )
    .execute();
  const members: HeldCommand[] = carriers.map((carrier, index) => ({
    id: newId('command'),
    tenantId: ctx.tenantId,
    nodeId: carrier.nodeId,
    kind: carrier.kind,
    payload: carrier.payload,
    batchId: id,
    index,
    proof: inclusionProof(levels, index, size).map(toHex),
  }));
  await insertHeldCommands(ctx.db, members, now, notAfter);
  // Whether or not anyone reads it, the batch ends when its window closes.
  await enqueueJob(ctx.db, { kind: BATCH_EXPIRY_JOB, payload: { batchId: id }, runAt: notAfter });
  ctx.emit({
    type: 'batch.created',
    subject: { type: 'batch', id },
    data: { size, approvalsNeeded: quorum.set.threshold, kinds, notAfter: notAfter.toISOString() },
  });
  return batchView(row, [], now);
}

/**
 * commandBatches.create for another module's method (metal.bulk): the same checks, leaves and
 * members, in the caller's transaction, so its batch is one approvers cannot tell from a hand-built
 * one. Given to the metal module by compute.ts, as the two modules do not import each other.
 */
export function batchProposer(settings: ApproverSettings) {
  const loader = createApproverLoader(settings);
  return (
    ctx: CallContext<unknown>,
    batch: { reason: string; hours: number; leaves: LeafInput[] },
  ): ReturnType<typeof createBatch> => createBatch(loader, { ...ctx, input: batch });
}
