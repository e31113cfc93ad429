/**
 * The workflow controller: a job that advances one workflow as far as it can under the row's lock
 * (starting steps, checking the node and the step's command), then schedules itself again while
 * the workflow runs and waits. Node steps go through the fleet's own drain and uncordon, so a
 * workflow changes a node exactly as an operator's command would, events included.
 */
import { ComputeError } from '@better-compute/core';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { writeEvents } from '../../db/unit-of-work.js';
import { enqueueJob } from '../../workers/jobs.js';
import type { CallContext, EventDraft, JobContext } from '../define-module.js';
import { drainNode, uncordonNode } from '../fleet/nodes.js';
import {
  cancelForWorkflow,
  commandOutcome,
  failedCommandsSince,
  nodeDaemonVersion,
} from '../commands/queries.js';
import { queueCommand } from '../commands/service.js';
import { findNode } from '../fleet/queries.js';
import { type WorkflowRow, type WorkflowStep, workflowsDb } from './tables.js';
import { WORKFLOW_JOB, workflowEvent } from './service.js';
import { hooksOf } from './hooks.js';

const RECHECK_MS = 500;
/**
 * A step waiting on its command is woken when the command ends (advanceCommand, commands.cancel
 * queue a wake for its workflow), and one waiting for its node's daemon to come back
 * (node.wait-version) when the daemon says hello (the gateway's wakeNodeWorkflows), so their own
 * check is only a net for a lost wake. Checking every half second instead made each waiting
 * workflow a transaction and a job twice a second: a wave of 20 updating nodes spent most of the
 * control plane's CPU on it, and a node back between two checks waited for the next.
 */
const WOKEN_RECHECK_MS = 5_000;
const isWoken = (step: WorkflowStep | undefined) =>
  (step?.kind === 'command' && step.commandId !== null) || step?.kind === 'node.wait-version';

type Outcome = { done: true } | { done: false } | { failed: string };

export async function advanceWorkflowJob(context: JobContext): Promise<void> {
  const workflowId = String(context.payload.workflowId ?? '');
  await context.db.transaction().execute((trx) => advanceWorkflow(trx, workflowId, context.now));
}

/**
 * Advances one workflow in the caller's transaction: the job's body, and what a caller starting
 * many workflows at once runs for each (startNodeWorkflow's `advance`), so every first command is
 * queued in that one transaction rather than one job after another.
 */
export async function advanceWorkflow(
  trx: Kysely<ComputeTables>,
  workflowId: string,
  clock: () => Date,
  /** Where a caller advancing it in its own step wants the events, in order with its own. */
  emit?: (event: EventDraft) => void,
): Promise<void> {
  {
    const events: EventDraft[] = [];
    const row = await workflowsDb(trx)
      .selectFrom('compute.workflows')
      .selectAll()
      .where('id', '=', workflowId)
      .forUpdate()
      .executeTakeFirst();
    if (!row || row.state !== 'running') return;
    const now = clock();
    const steps = row.steps.map((s) => ({ ...s }));
    let index = row.current_step;
    let state: WorkflowRow['state'] = 'running';
    while (index < steps.length) {
      const step = steps[index]!;
      if (step.state === 'pending') {
        Object.assign(step, { state: 'running', startedAt: now.toISOString() });
        events.push(workflowEvent(row, 'step_started', { step: index, name: step.name }));
      }
      const outcome = await runStep(trx, row, steps, step, now, events);
      if ('failed' in outcome) {
        Object.assign(step, { state: 'failed', error: outcome.failed, finishedAt: now.toISOString() });
        events.push(
          workflowEvent(row, 'step_failed', { step: index, name: step.name, error: outcome.failed }),
        );
        events.push(workflowEvent(row, 'failed', { step: index }));
        state = 'failed';
        break;
      }
      if (!outcome.done) break;
      Object.assign(step, { state: 'succeeded', finishedAt: now.toISOString() });
      events.push(workflowEvent(row, 'step_succeeded', { step: index, name: step.name }));
      index += 1;
    }
    if (state === 'running' && index >= steps.length) {
      state = 'succeeded';
      events.push(workflowEvent(row, 'succeeded'));
    }
    // What the workflow changes moves with it, in this transaction.
    const hookContext = {
      db: trx,
      workflow: row,
      steps,
      now,
      emit: (event: EventDraft) => void events.push(event),
    };
    if (state === 'succeeded') await hooksOf(row.kind).succeeded?.(hookContext);
    if (state === 'failed')
      await hooksOf(row.kind).failed?.(
        hookContext,
        steps.find((s) => s.state === 'failed')?.error ?? 'a step failed',
      );
    await workflowsDb(trx)
      .updateTable('compute.workflows')
      .set({
        state,
        current_step: Math.min(index, steps.length - 1),
        steps: JSON.stringify(steps),
        updated_at: now,
        finished_at: state === 'running' ? null : now,
      })
      .where('id', '=', row.id)
      .execute();
    if (emit) events.forEach(emit);
    else
      await writeEvents(trx, events, {
        tenantId: row.tenant_id,
        actor: null,
        requestId: `workflow:${row.id}`,
      });
    if (state === 'running') {
      const waiting = steps[index];
      const recheck =
        waiting?.kind === 'wait' && typeof waiting.params?.recheckMs === 'number'
          ? waiting.params.recheckMs
          : isWoken(waiting)
            ? WOKEN_RECHECK_MS
            : RECHECK_MS;
      await enqueueAgain(trx, row.id, new Date(now.getTime() + recheck));
    }
  }
}

async function enqueueAgain(db: Kysely<ComputeTables>, workflowId: string, runAt: Date) {
  await enqueueJob(db, { kind: WORKFLOW_JOB, payload: { workflowId }, runAt });
}

/** Runs or checks one step; a refusal of the fleet (a retired node, say) fails the step with its words. */
async function runStep(
  trx: Kysely<ComputeTables>,
  row: WorkflowRow,
  steps: WorkflowStep[],
  step: WorkflowStep,
  now: Date,
  events: EventDraft[],
): Promise<Outcome> {
  const asOperator = <I>(input: I): CallContext<I> => ({
    input,
    identity: null,
    tenantId: row.tenant_id,
    requestId: `workflow:${row.id}`,
    db: trx,
    emit: (event) => void events.push(event),
    now: () => now,
    // A workflow acts in its node's tenant and names no other.
    tenantExists: async (tenantId) => tenantId === row.tenant_id,
    routes: () => [],
  });
  try {
    switch (step.kind) {
      case 'node.drain':
        await drainNode(asOperator({ nodeId: row.node_id, reason: `workflow ${row.id}` }));
        return { done: true };
      case 'node.uncordon':
        await uncordonNode(asOperator({ nodeId: row.node_id, reason: `workflow ${row.id}` }));
        return { done: true };
      case 'node.wait-drained': {
        const node = await findNode(trx, row.node_id);
        if (!node || node.state === 'retired')
          return { failed: `node ${row.node_id} is ${node?.state ?? 'gone'}` };
        return { done: node.state === 'drained' };
      }
      case 'node.wait-version': {
        // The node came back: a session begun since the workflow did, saying the version asked for.
        const version = String(step.params?.version ?? '');
        const session = await nodeDaemonVersion(trx, row.node_id);
        if (session && session.version === version && session.connectedAt >= new Date(row.created_at))
          return { done: true };
        const deadline = Date.parse(String(step.params?.deadline ?? ''));
        if (Number.isFinite(deadline) && now.getTime() > deadline)
          return {
            failed: `node ${row.node_id} did not come back with version ${version} in time (it reports ${session?.version ?? 'no session'})`,
          };
        return { done: false };
      }
      case 'wait': {
        const check = hooksOf(row.kind).check;
        if (!check) return { failed: `workflow kind ${row.kind} has no check for step ${step.name}` };
        const outcome = await check(
          { db: trx, workflow: row, steps, now, emit: (event) => void events.push(event) },
          step,
        );
        if ('failed' in outcome || outcome.done) return outcome;
        const deadline = Date.parse(step.startedAt ?? '') + Number(step.params?.timeoutMs);
        if (Number.isFinite(deadline) && now.getTime() > deadline)
          return {
            failed: `${step.name}: not done within ${Math.round(Number(step.params?.timeoutMs) / 1000)} s`,
          };
        return { done: false };
      }
      case 'node.no-failed-commands': {
        const failed = await failedCommandsSince(trx, row.node_id, new Date(row.created_at));
        if (failed.length === 0) return { done: true };
        return {
          failed: `node ${row.node_id} failed ${failed.length === 5 ? '5 or more commands' : `${failed.length} command(s)`} since the update began: ${failed
            .map((c) => `${c.id} (${c.kind})${c.error ? `: ${c.error.slice(0, 200)}` : ''}`)
            .join('; ')}`,
        };
      }
      case 'command': {
        if (!step.commandId) {
          // A step names its command; a node-maintenance step (made before steps did) runs the
          // workflow's maintenance script.
          const { kind, payload } = step.command ?? {
            kind: 'exec.script' as const,
            payload: { script: String(row.input.script) },
          };
          const command = await queueCommand(
            trx,
            {
              tenantId: row.tenant_id,
              nodeId: row.node_id,
              kind: kind as Parameters<typeof queueCommand>[1]['kind'],
              payload,
              workflowId: row.id,
              now,
            },
            (event) => void events.push(event),
          );
          step.commandId = command.id;
          await hooksOf(row.kind).commandQueued?.(
            { db: trx, workflow: row, steps, now, emit: (event) => void events.push(event) },
            { id: command.id, kind },
          );
          return { done: false };
        }
        const command = await commandOutcome(trx, step.commandId);
        if (!command) return { failed: `command ${step.commandId} is gone` };
        if (command.state === 'succeeded') return { done: true };
        if (command.state === 'failed' || command.state === 'cancelled')
          return {
            failed: `command ${step.commandId} ${command.state}${command.exit_code !== null ? ` with exit code ${command.exit_code}` : ''}${command.error ? `: ${command.error}` : ''}`,
          };
        // A node that took the command and never answers (a BMC call hung, the agent gone) would
        // hold the workflow, and what it changes, for ever: a step with a timeout fails past it,
        // and the node is asked to drop the command.
        const timeoutMs = Number(step.params?.timeoutMs);
        if (Number.isFinite(timeoutMs) && now.getTime() > Date.parse(step.startedAt ?? '') + timeoutMs) {
          await cancelForWorkflow(trx, step.commandId, now);
          return {
            failed: `command ${step.commandId} (${step.commandKind ?? step.command?.kind ?? 'command'}) did not answer within ${Math.round(timeoutMs / 1000)} s`,
          };
        }
        return { done: false };
      }
    }
  } catch (error) {
    if (error instanceof ComputeError) return { failed: `${error.code}: ${error.message}` };
    throw error;
  }
}
