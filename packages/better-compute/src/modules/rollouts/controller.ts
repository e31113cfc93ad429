/**
 * The rollout controller: a job that advances one rollout under its row's lock. It follows the
 * update workflows of the nodes updating (a node succeeds with its workflow, fails with it, or fails
 * once its health timeout and a grace have passed), pauses the rollout as soon as a wave's failures
 * pass the failure budget, and otherwise starts the next wave once a wave's nodes have all finished:
 * each node of a wave gets a `node.update` workflow (install, which the new version reports done
 * once it passed its health check; wait for the new version; no failed commands), whose first
 * step runs in the same transaction, so a wave's update
 * commands are all queued at once. It runs again every second while a node is updating or the
 * rollout runs. docs/rollouts.md.
 */
import type { CatalogEventDraft } from '@better-compute/events';
import { sql } from 'kysely';
import { writeEvents } from '../../db/unit-of-work.js';
import { enqueueJob } from '../../workers/jobs.js';
import type { EventDraft, JobContext } from '../define-module.js';
import { findNode } from '../fleet/queries.js';
import { releaseForRollout } from '../releases/artifacts.js';
import { workflowOutcomes } from '../workflows/queries.js';
import { advanceWorkflow } from '../workflows/controller.js';
import { commandStep, startNodeWorkflow, step } from '../workflows/service.js';
import { ROLLOUT_JOB } from './rollouts.js';
import { type RolloutNode, type RolloutRow, rolloutsDb } from './tables.js';

const RECHECK_MS = 1_000;
/** Past its health timeout, how long a node's workflow still has before the rollout counts it failed. */
const GRACE_MS = 60_000;

export async function advanceRolloutJob(context: JobContext): Promise<void> {
  const rolloutId = String(context.payload.rolloutId ?? '');
  await context.db.transaction().execute(async (trx) => {
    const db = rolloutsDb(trx);
    const row = await db
      .selectFrom('compute.rollouts')
      .selectAll()
      .where('id', '=', rolloutId)
      .forUpdate()
      .executeTakeFirst();
    if (!row) return;
    const now = context.now();
    const events: EventDraft[] = [];
    const subject = { type: 'rollout' as const, id: row.id };
    const emit = (event: CatalogEventDraft) => void events.push(event as EventDraft);
    const waves = row.waves.map((wave) => ({ ...wave, nodes: wave.nodes.map((node) => ({ ...node })) }));
    let state: RolloutRow['state'] = row.state;
    let current = row.current_wave;
    let reason = row.reason;
    let finishedAt: Date | null = row.finished_at;

    // 1. What the nodes updating became.
    const updating = waves.flatMap((wave) =>
      wave.nodes.filter((node) => node.state === 'updating').map((node) => ({ wave, node })),
    );
    const outcomes = await workflowOutcomes(
      trx,
      updating.flatMap(({ node }) => (node.workflowId ? [node.workflowId] : [])),
    );
    const limit = row.health_timeout_seconds * 1000 + GRACE_MS;
    for (const { wave, node } of updating) {
      const outcome = node.workflowId ? outcomes.get(node.workflowId) : undefined;
      const fail = (error: string) => {
        Object.assign(node, { state: 'failed', error: error.slice(0, 2000), finishedAt: now.toISOString() });
        emit({
          type: 'rollout.node-failed',
          subject,
          data: {
            version: row.version,
            wave: wave.index,
            nodeId: node.nodeId,
            workflowId: node.workflowId,
            error: node.error!,
          },
        });
      };
      if (outcome?.state === 'succeeded') {
        Object.assign(node, { state: 'succeeded', finishedAt: now.toISOString() });
        // Every change of a node has its event, so a console showing the rollout reads it again.
        emit({
          type: 'rollout.node-succeeded',
          subject,
          data: { version: row.version, wave: wave.index, nodeId: node.nodeId, workflowId: node.workflowId },
        });
      } else if (outcome && (outcome.state === 'failed' || outcome.state === 'aborted'))
        fail(outcome.error ?? `workflow ${node.workflowId} ${outcome.state}`);
      else if (!outcome) fail(`workflow ${node.workflowId ?? '(none)'} is gone`);
      else if (node.startedAt && now.getTime() - Date.parse(node.startedAt) > limit)
        fail(`the update did not finish within its ${row.health_timeout_seconds} s health timeout`);
    }

    // 2. The gate of the wave running, and the next wave.
    while (state === 'running' && current < waves.length) {
      const wave = waves[current]!;
      if (wave.state === 'pending') {
        await startWave(trx, row, wave, now, emit);
      }
      const failed = wave.nodes.filter((node) => node.state === 'failed').length;
      if (failed > row.failure_budget) {
        wave.state = 'failed';
        wave.finishedAt ??= now.toISOString();
        state = 'paused';
        reason = `wave ${wave.index} failed its gate: ${failed} node(s) failed, the failure budget is ${row.failure_budget}`;
        emit({
          type: 'rollout.paused',
          subject,
          data: { version: row.version, wave: wave.index, reason, by: 'gate' },
        });
        break;
      }
      if (wave.nodes.some((node) => node.state === 'updating' || node.state === 'pending')) break;
      wave.state = 'passed';
      wave.finishedAt = now.toISOString();
      emit({
        type: 'rollout.wave-passed',
        subject,
        data: {
          version: row.version,
          wave: wave.index,
          succeeded: wave.nodes.filter((node) => node.state === 'succeeded').length,
          failed,
        },
      });
      current += 1;
      if (current >= waves.length) {
        state = 'completed';
        finishedAt = now;
        const all = waves.flatMap((w) => w.nodes);
        emit({
          type: 'rollout.completed',
          subject,
          data: {
            version: row.version,
            succeeded: all.filter((node) => node.state === 'succeeded').length,
            failed: all.filter((node) => node.state === 'failed').length,
          },
        });
      }
    }

    await db
      .updateTable('compute.rollouts')
      .set({
        state,
        current_wave: current,
        reason,
        waves: JSON.stringify(waves),
        updated_at: now,
        finished_at: finishedAt,
      })
      .where('id', '=', row.id)
      .execute();
    await writeEvents(trx, events, { tenantId: 'root', actor: null, requestId: `rollout:${row.id}` });
    const stillUpdating = waves.some((wave) => wave.nodes.some((node) => node.state === 'updating'));
    // One chain of checks per rollout: a wake (a workflow that ended) already queued serves as the next.
    if ((state === 'running' || stillUpdating) && !(await checkQueued(trx, row.id)))
      await enqueueJob(trx, {
        kind: ROLLOUT_JOB,
        payload: { rolloutId: row.id },
        runAt: new Date(now.getTime() + RECHECK_MS),
      });
  });
}

/** Whether a check of the rollout is queued already (the jobs table is the foundation's, shared). */
async function checkQueued(trx: JobContext['db'], rolloutId: string): Promise<boolean> {
  const found = await sql<{ one: number }>`
    select 1 as one from compute.jobs
    where kind = ${ROLLOUT_JOB} and state = 'queued' and payload->>'rolloutId' = ${rolloutId}
    limit 1`.execute(trx);
  return found.rows.length > 0;
}

/** Starts a wave: an update workflow on each of its nodes (a node gone or retired since fails at once). */
async function startWave(
  trx: JobContext['db'],
  row: RolloutRow,
  wave: RolloutRow['waves'][number],
  now: Date,
  emit: (event: CatalogEventDraft) => void,
): Promise<void> {
  const release = await releaseForRollout(trx, row.version);
  wave.state = 'running';
  wave.startedAt = now.toISOString();
  const deadline = new Date(now.getTime() + row.health_timeout_seconds * 1000).toISOString();
  for (const node of wave.nodes as RolloutNode[]) {
    const found = await findNode(trx, node.nodeId);
    if (!release || !found || found.state === 'retired') {
      Object.assign(node, {
        state: 'failed',
        error: !release
          ? `release ${row.version} is no longer registered`
          : `node ${node.nodeId} is ${found?.state ?? 'gone'}`,
        startedAt: now.toISOString(),
        finishedAt: now.toISOString(),
      });
      emit({
        type: 'rollout.node-failed',
        subject: { type: 'rollout', id: row.id },
        data: {
          version: row.version,
          wave: wave.index,
          nodeId: node.nodeId,
          workflowId: null,
          error: node.error!,
        },
      });
      continue;
    }
    const waitVersion = step(`wait for the node to come back as ${row.version}`, 'node.wait-version');
    waitVersion.params = { version: row.version, deadline };
    const workflowId = await startNodeWorkflow(
      { db: trx, emit, now },
      {
        nodeId: node.nodeId,
        kind: 'node.update',
        steps: [
          commandStep(`install bcd ${row.version}`, 'bcd.update', {
            release: release.envelope,
            healthTimeoutSeconds: row.health_timeout_seconds,
          }),
          // No health.check command after it: the new version reports bcd.update succeeded only
          // once it has passed that same check on itself (its trial), over the session it opened.
          waitVersion,
          step('no failed commands since the update began', 'node.no-failed-commands'),
        ],
        input: { rolloutId: row.id, version: row.version },
        reason: `rollout ${row.id} of bcd ${row.version}, wave ${wave.index}`,
      },
      // The whole wave's update commands are queued in this transaction, so the gateway sends them
      // together when it commits; a job per workflow ran one after another on the worker loop,
      // behind the artifact downloads of the nodes already updating, and spread a wave over seconds.
      { advance: advanceWorkflow },
    );
    Object.assign(node, { state: 'updating', workflowId, startedAt: now.toISOString() });
  }
  emit({
    type: 'rollout.wave-started',
    subject: { type: 'rollout', id: row.id },
    data: { version: row.version, wave: wave.index, nodeIds: wave.nodes.map((node) => node.nodeId) },
  });
}
