/**
 * The `rollouts` group's service: a rollout is created with its nodes split into waves and its
 * first wave started by the controller job (controller.ts); `pause`, `resume` and `abort` steer it;
 * `list` and `get` read it. Every change is one transaction with its event, in the root tenant.
 * docs/rollouts.md.
 */
import { ComputeError, newId } from '@better-compute/core';
import { enqueueJob } from '../../workers/jobs.js';
import { cursorRow, pageOf } from '../../db/pages.js';
import type { CallContext } from '../define-module.js';
import { nodesForRollout, poolExists } from '../fleet/queries.js';
import { matchesSelector, parseSelector } from '../fleet/reservations/selector.js';
import { releaseForRollout } from '../releases/artifacts.js';
import { abortWorkflowBeforeItRuns } from '../workflows/service.js';
import { type RolloutRow, type RolloutWave, rolloutsDb, type RolloutsDb } from './tables.js';

export const ROLLOUT_JOB = 'rollouts.advance';

const iso = (value: Date | string) => new Date(value).toISOString();

function rolloutView(row: RolloutRow) {
  return {
    id: row.id,
    releaseId: row.release_id,
    version: row.version,
    state: row.state,
    target: row.target,
    waves: row.waves,
    currentWave: row.current_wave,
    failureBudget: row.failure_budget,
    healthTimeoutSeconds: row.health_timeout_seconds,
    reason: row.reason,
    createdBy: row.created_by,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
    finishedAt: row.finished_at === null ? null : iso(row.finished_at),
  };
}

/**
 * Splits nodes into waves: each spec is how many nodes have the release once its wave is done (a
 * count, or a share rounded up), so the specs must rise and the last must reach every node. A spec
 * that adds no node (10% of 3 after 1) makes no wave.
 */
export function splitWaves(nodeIds: readonly string[], specs: readonly string[]): RolloutWave[] {
  const total = nodeIds.length;
  const waves: RolloutWave[] = [];
  let done = 0;
  specs.forEach((spec, i) => {
    const target = spec.endsWith('%')
      ? Math.ceil((total * Number(spec.slice(0, -1))) / 100)
      : Math.min(total, Number(spec));
    if (target < done)
      throw new ComputeError('INVALID_ARGUMENT', `waves: ${spec} is fewer nodes than the wave before it`, {
        details: { field: 'waves', wave: i, spec },
        hint: 'Each wave says how many nodes have the release once it is done, so they rise: 1,10%,50%,100%.',
      });
    if (target > done) {
      waves.push({
        index: waves.length,
        size: spec,
        state: 'pending',
        nodes: nodeIds.slice(done, target).map((nodeId) => ({
          nodeId,
          state: 'pending',
          workflowId: null,
          error: null,
          startedAt: null,
          finishedAt: null,
        })),
        startedAt: null,
        finishedAt: null,
      });
      done = target;
    }
  });
  if (done < total)
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `waves: the last wave reaches ${done} of the ${total} nodes; it must reach them all`,
      {
        details: { field: 'waves', reached: done, nodes: total },
        hint: 'End the waves with 100% (or the number of nodes).',
      },
    );
  return waves;
}

export async function createRollout(
  ctx: CallContext<{
    version: string;
    poolId?: string | undefined;
    nodeIds?: string[] | undefined;
    selector?: string | undefined;
    waves: string[];
    failureBudget: number;
    healthTimeoutSeconds: number;
    reason?: string | undefined;
  }>,
) {
  const input = ctx.input;
  const release = await releaseForRollout(ctx.db, input.version);
  if (!release)
    throw new ComputeError('NOT_FOUND', `release ${input.version} is not registered`, {
      details: { version: input.version },
      hint: 'Register it first (better-compute releases register ENVELOPE), and upload its build (releases upload).',
    });
  if (release.stored.length === 0)
    throw new ComputeError('INVALID_STATE', `the deployment stores no build of release ${input.version}`, {
      details: { version: input.version },
      hint: `Upload it: better-compute releases upload ${input.version} FILE --platform linux-x64 --tenant root.`,
    });
  if (input.poolId !== undefined && !(await poolExists(ctx.db, input.poolId)))
    throw new ComputeError('NOT_FOUND', `pool ${input.poolId} does not exist`, {
      details: { id: input.poolId },
    });
  if (input.nodeIds && new Set(input.nodeIds).size !== input.nodeIds.length)
    throw new ComputeError('INVALID_ARGUMENT', 'nodeIds names a node twice', {
      details: { field: 'nodeIds' },
      hint: 'Name each node once.',
    });
  const terms = input.selector === undefined ? null : parseSelector(input.selector);
  if (terms?.some((term) => term.field !== null))
    throw new ComputeError('INVALID_ARGUMENT', 'selector: a rollout selects nodes by their labels only', {
      details: { field: 'selector' },
      hint: 'Use node label terms such as rack=r12, zone in (eu-1, eu-2).',
    });
  let nodes = await nodesForRollout(ctx.db, { poolId: input.poolId, nodeIds: input.nodeIds });
  if (input.nodeIds) {
    const found = new Set(nodes.map((node) => node.id));
    const missing = input.nodeIds.filter((id) => !found.has(id));
    if (missing.length)
      throw new ComputeError(
        'NOT_FOUND',
        `node ${missing[0]} does not exist, or is retired or still joining`,
        {
          details: { ids: missing.slice(0, 10) },
          hint: 'Name nodes that have joined and are not retired (better-compute nodes list).',
        },
      );
  }
  if (terms)
    nodes = nodes.filter((node) =>
      matchesSelector(terms, { model: '', product: '', vramGiB: 0 }, node.labels),
    );
  if (nodes.length === 0)
    throw new ComputeError('INVALID_ARGUMENT', 'the rollout selects no node', {
      details: { field: input.poolId ? 'poolId' : 'selector' },
      hint: 'Choose a pool with nodes, name nodes, or a selector some node matches.',
    });
  const waves = splitWaves(
    nodes.map((node) => node.id),
    input.waves,
  );
  const now = ctx.now();
  const row = await rolloutsDb(ctx.db)
    .insertInto('compute.rollouts')
    .values({
      id: newId('rollout'),
      release_id: release.id,
      version: release.version,
      state: 'running',
      target: JSON.stringify({
        poolId: input.poolId ?? null,
        nodeIds: input.nodeIds ?? null,
        selector: input.selector ?? null,
      }),
      waves: JSON.stringify(waves),
      current_wave: 0,
      failure_budget: input.failureBudget,
      health_timeout_seconds: input.healthTimeoutSeconds,
      reason: null,
      created_by: ctx.identity!.principalId,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({
    type: 'rollout.created',
    subject: { type: 'rollout', id: row.id },
    data: {
      version: release.version,
      nodes: nodes.length,
      waves: waves.map((wave) => wave.nodes.length),
      failureBudget: input.failureBudget,
      healthTimeoutSeconds: input.healthTimeoutSeconds,
    },
  });
  await enqueueJob(ctx.db, { kind: ROLLOUT_JOB, payload: { rolloutId: row.id }, runAt: now, wake: true });
  return rolloutView(row);
}

async function loadRollout(db: RolloutsDb, id: string, forUpdate = false) {
  let query = db.selectFrom('compute.rollouts').selectAll().where('id', '=', id);
  if (forUpdate) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row)
    throw new ComputeError('NOT_FOUND', `rollout ${id} does not exist`, {
      details: { id },
      hint: 'List the rollouts with "better-compute rollouts list".',
    });
  return row;
}

export async function getRollout(ctx: CallContext<{ rolloutId: string }>) {
  return rolloutView(await loadRollout(rolloutsDb(ctx.db), ctx.input.rolloutId));
}

export async function listRollouts(
  ctx: CallContext<{ state?: RolloutRow['state'] | undefined; limit: number; cursor?: string | undefined }>,
) {
  const db = rolloutsDb(ctx.db);
  let query = db
    .selectFrom('compute.rollouts')
    .selectAll()
    .orderBy('seq', 'desc')
    .limit(ctx.input.limit + 1);
  if (ctx.input.state) query = query.where('state', '=', ctx.input.state);
  const after = await cursorRow(ctx.input.cursor, 'rollout', (id) =>
    db.selectFrom('compute.rollouts').select('seq').where('id', '=', id).executeTakeFirst(),
  );
  if (after) query = query.where('seq', '<', after.seq);
  return pageOf(await query.execute(), ctx.input.limit, rolloutView);
}

const ALLOWED: Record<'pause' | 'resume' | 'abort', RolloutRow['state'][]> = {
  pause: ['running'],
  resume: ['paused'],
  abort: ['running', 'paused'],
};
const HINT: Record<'pause' | 'resume' | 'abort', string> = {
  pause: 'Only a running rollout pauses.',
  resume: 'Only a paused rollout resumes.',
  abort: 'A rollout that completed or was aborted is finished.',
};

/** Pause, resume or abort: one transaction, one event. */
export async function steerRollout(
  ctx: CallContext<{ rolloutId: string }>,
  action: 'pause' | 'resume' | 'abort',
) {
  const db = rolloutsDb(ctx.db);
  const row = await loadRollout(db, ctx.input.rolloutId, true);
  if (!ALLOWED[action].includes(row.state))
    throw new ComputeError('INVALID_STATE', `rollout ${row.id} is ${row.state}; it cannot ${action}`, {
      details: { state: row.state },
      hint: HINT[action],
    });
  const now = ctx.now();
  const waves = row.waves.map((wave) => ({ ...wave, nodes: wave.nodes.map((node) => ({ ...node })) }));
  let currentWave = row.current_wave;
  let state: RolloutRow['state'] = row.state;
  let reason: string | null = row.reason;
  let finishedAt: Date | null = null;
  const subject = { type: 'rollout' as const, id: row.id };
  const at = { version: row.version, wave: currentWave };
  if (action === 'pause') {
    state = 'paused';
    reason = 'paused by an operator';
    ctx.emit({ type: 'rollout.paused', subject, data: { ...at, reason, by: 'operator' } });
  } else if (action === 'resume') {
    state = 'running';
    reason = null;
    // A wave that failed its gate is accepted as it is: its failed nodes stay on the old version.
    if (waves[currentWave]?.state === 'failed') currentWave += 1;
    ctx.emit({ type: 'rollout.resumed', subject, data: { version: row.version, wave: currentWave } });
  } else {
    state = 'aborted';
    reason = 'aborted by an operator';
    finishedAt = now;
    let skipped = 0;
    const cancelled: string[] = [];
    for (const wave of waves)
      for (const node of wave.nodes) {
        if (node.state === 'pending') {
          Object.assign(node, { state: 'skipped', finishedAt: now.toISOString() });
          skipped += 1;
        } else if (node.state === 'updating' && node.workflowId) {
          // An update the node has not started is taken back: its workflow is aborted and its
          // command cancelled (a sent one the node is told to drop). One already running, the node
          // finishes, or goes back by itself.
          const taken = await abortWorkflowBeforeItRuns(
            { db: ctx.db, now, emit: ctx.emit },
            node.workflowId,
            `rollout ${row.id} was aborted`,
          );
          if (!taken) continue;
          Object.assign(node, {
            state: 'cancelled',
            error:
              taken.commandState === 'sent'
                ? `aborted before the node ran it: command ${taken.commandId} cancelled (the node was told to drop it)`
                : taken.commandId
                  ? `aborted before the node ran it: command ${taken.commandId} cancelled before it was sent`
                  : 'aborted before its update command was sent',
            finishedAt: now.toISOString(),
          });
          cancelled.push(node.nodeId);
        }
      }
    ctx.emit({ type: 'rollout.aborted', subject, data: { ...at, skipped, cancelled } });
  }
  const updated = await db
    .updateTable('compute.rollouts')
    .set({
      state,
      reason,
      current_wave: currentWave,
      waves: JSON.stringify(waves),
      updated_at: now,
      finished_at: finishedAt,
    })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  if (state === 'running')
    await enqueueJob(ctx.db, { kind: ROLLOUT_JOB, payload: { rolloutId: row.id }, runAt: now, wake: true });
  return rolloutView(updated);
}
