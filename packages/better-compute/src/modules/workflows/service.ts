/**
 * Workflows as rows: created by operators, steered (pause, resume, abort, retry from the failed
 * step) by methods, and advanced by the controller job (controller.ts). Each transition emits an
 * event in the transaction that makes it.
 */
import { ComputeError, newId } from '@better-compute/core';
import type { CatalogEventDraft, EventData, EventType } from '@better-compute/events';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { cursorRow, pageOf } from '../../db/pages.js';
import type { CallContext, EventDraft } from '../define-module.js';

type WorkflowEventName = EventType extends infer T ? (T extends `workflow.${infer S}` ? S : never) : never;
import { enqueueJob } from '../../workers/jobs.js';
import { hooksOf } from './hooks.js';
import { cancelForWorkflow, commandState } from '../commands/queries.js';
import { findNode, nodeTenant } from '../fleet/queries.js';
import {
  type WorkflowKind,
  type WorkflowRow,
  type WorkflowStep,
  workflowsDb,
  type WorkflowsDb,
} from './tables.js';

export const WORKFLOW_JOB = 'workflows.advance';

const iso = (value: Date | string) => new Date(value).toISOString();

function workflowView(row: WorkflowRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    nodeId: row.node_id,
    kind: row.kind,
    state: row.state,
    instanceId: row.instance_id,
    currentStep: row.current_step,
    steps: row.steps.map(({ command: _command, ...step }) => ({
      ...step,
      commandKind: step.commandKind ?? _command?.kind ?? null,
    })),
    reason: row.reason,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
    finishedAt: row.finished_at === null ? null : iso(row.finished_at),
  };
}

export function step(
  name: string,
  kind: WorkflowStep['kind'],
  command?: { kind: string; payload: Record<string, unknown> },
): WorkflowStep {
  return {
    name,
    kind,
    ...(command ? { command, commandKind: command.kind } : {}),
    state: 'pending',
    attempt: 1,
    commandId: null,
    error: null,
    startedAt: null,
    finishedAt: null,
  };
}

/**
 * A step that has the node run one command: `kind` with `payload`; with `timeoutMs`, the step fails
 * (and the node is asked to drop the command) when no answer came that long after it started.
 */
export function commandStep(
  name: string,
  kind: string,
  payload: Record<string, unknown>,
  options: { timeoutMs?: number } = {},
): WorkflowStep {
  const made = step(name, 'command', { kind, payload });
  return options.timeoutMs === undefined ? made : { ...made, params: { timeoutMs: options.timeoutMs } };
}

/**
 * A step that waits for the workflow kind's own check (its hooks' `check`), looked at again every
 * `recheckMs` and whenever wakeWorkflow is called; failed once `timeoutMs` passed since it started.
 */
export function waitStep(
  name: string,
  params: { timeoutMs: number; recheckMs: number } & Record<string, unknown>,
): WorkflowStep {
  return { ...step(name, 'wait'), params };
}

/** Has the controller look at one running workflow now (something its wait step waits for happened). */
export async function wakeWorkflow(db: Kysely<ComputeTables>, workflowId: string, now: Date): Promise<void> {
  await enqueueJob(db, { kind: WORKFLOW_JOB, payload: { workflowId }, runAt: now, wake: true });
}

/**
 * Starts a workflow on a node for a module (an instance's, a sandbox's, a volume's): in the node's
 * owner's tenant, so the pool's operators see what runs on their machines, with `input` where the
 * module's hooks find their subject. The worker loops are woken when the caller's transaction
 * commits, so the first step starts at once rather than at the next poll.
 */
export async function startNodeWorkflow(
  ctx: { db: Kysely<ComputeTables>; emit: (event: CatalogEventDraft) => void; now: Date },
  workflow: {
    nodeId: string;
    instanceId?: string | null;
    kind: Exclude<WorkflowKind, 'node.maintenance'>;
    steps: WorkflowStep[];
    input: Record<string, string>;
    reason: string;
  },
  options: {
    /**
     * Runs the workflow's first steps now, in the caller's transaction, instead of in a job queued
     * for them: a caller starting many workflows at once (a rollout's wave) then has every first
     * command queued when it commits, not one job run after another on a busy worker loop.
     */
    advance?: (
      db: Kysely<ComputeTables>,
      workflowId: string,
      now: () => Date,
      emit: (event: EventDraft) => void,
    ) => Promise<void>;
  } = {},
): Promise<string> {
  const db = workflowsDb(ctx.db);
  const tenantId = await nodeTenant(ctx.db, workflow.nodeId);
  const row = await db
    .insertInto('compute.workflows')
    .values({
      id: newId('workflow'),
      tenant_id: tenantId,
      node_id: workflow.nodeId,
      instance_id: workflow.instanceId ?? null,
      kind: workflow.kind,
      state: 'running',
      current_step: 0,
      steps: JSON.stringify(workflow.steps),
      input: JSON.stringify(workflow.input),
      reason: workflow.reason,
      created_at: ctx.now,
      updated_at: ctx.now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit(workflowEvent(row, 'started', { kind: workflow.kind }));
  if (options.advance)
    // The workflow controller's events are the catalog's (workflowEvent, queueCommand's), typed wider.
    await options.advance(
      ctx.db,
      row.id,
      () => ctx.now,
      (event) => ctx.emit(event as CatalogEventDraft),
    );
  else
    await enqueueJob(ctx.db, {
      kind: WORKFLOW_JOB,
      payload: { workflowId: row.id },
      runAt: ctx.now,
      wake: true,
    });
  return row.id;
}

/** A workflow's event: `workflowEvent(row, 'paused', { step })` is `workflow.paused` with its node. */
export function workflowEvent<S extends WorkflowEventName>(
  row: Pick<WorkflowRow, 'id' | 'tenant_id' | 'node_id'>,
  type: S,
  ...data: {} extends Omit<EventData<`workflow.${S}`>, 'nodeId'>
    ? [data?: Omit<EventData<`workflow.${S}`>, 'nodeId'>]
    : [data: Omit<EventData<`workflow.${S}`>, 'nodeId'>]
): CatalogEventDraft {
  return {
    type: `workflow.${type}`,
    tenantId: row.tenant_id,
    subject: { type: 'workflow', id: row.id },
    data: { nodeId: row.node_id, ...data[0] },
  } as unknown as CatalogEventDraft; // TypeScript cannot relate the generic S to the union; the parameters are checked per type.
}

async function loadWorkflow(db: WorkflowsDb, tenantId: string, id: string, forUpdate = false) {
  let query = db
    .selectFrom('compute.workflows')
    .selectAll()
    .where('id', '=', id)
    .where('tenant_id', '=', tenantId);
  if (forUpdate) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) throw new ComputeError('NOT_FOUND', `workflow ${id} does not exist`, { details: { id } });
  return row;
}

export async function createWorkflow(
  ctx: CallContext<
    { nodeId: string; kind: 'node.maintenance'; script: string; reason?: string | undefined },
    CatalogEventDraft
  >,
) {
  const db = workflowsDb(ctx.db);
  const node = await findNode(ctx.db, ctx.input.nodeId, ctx.tenantId);
  if (!node)
    throw new ComputeError('NOT_FOUND', `node ${ctx.input.nodeId} does not exist`, {
      details: { id: ctx.input.nodeId },
    });
  if (node.state === 'retired' || node.state === 'joining') {
    throw new ComputeError('INVALID_STATE', `node ${node.id} is ${node.state}; it takes no maintenance`, {
      details: { state: node.state },
      hint: 'Maintain a node that has joined and is not retired (better-compute nodes list).',
    });
  }
  const open = await db
    .selectFrom('compute.workflows')
    .select('id')
    .where('node_id', '=', node.id)
    .where('kind', '=', 'node.maintenance')
    .where('state', 'in', ['running', 'paused', 'failed'])
    .executeTakeFirst();
  if (open) {
    throw new ComputeError('CONFLICT', `node ${node.id} already has workflow ${open.id} open`, {
      details: { workflowId: open.id },
      hint: `Finish it first: better-compute workflows get ${open.id}, then resume, retry or abort it.`,
    });
  }
  const now = ctx.now();
  const row = await db
    .insertInto('compute.workflows')
    .values({
      id: newId('workflow'),
      tenant_id: ctx.tenantId,
      node_id: node.id,
      kind: 'node.maintenance',
      state: 'running',
      current_step: 0,
      steps: JSON.stringify([
        step('drain the node', 'node.drain'),
        step('wait until it is drained', 'node.wait-drained'),
        step(`run ${ctx.input.script}`, 'command'),
        step('uncordon the node', 'node.uncordon'),
      ]),
      input: JSON.stringify({ script: ctx.input.script }),
      reason: ctx.input.reason ?? null,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit(workflowEvent(row, 'started', { kind: row.kind }));
  await enqueueJob(ctx.db, { kind: WORKFLOW_JOB, payload: { workflowId: row.id }, runAt: now, wake: true });
  return workflowView(row);
}

export async function listWorkflows(
  ctx: CallContext<
    {
      nodeId: string;
      state?: WorkflowRow['state'] | undefined;
      limit: number;
      cursor?: string | undefined;
    },
    CatalogEventDraft
  >,
) {
  const db = workflowsDb(ctx.db);
  let query = db
    .selectFrom('compute.workflows')
    .selectAll()
    .where('tenant_id', '=', ctx.tenantId)
    .where('node_id', '=', ctx.input.nodeId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(ctx.input.limit + 1);
  if (ctx.input.state) query = query.where('state', '=', ctx.input.state);
  const after = await cursorRow(ctx.input.cursor, 'workflow of this node', (id) =>
    db
      .selectFrom('compute.workflows')
      .select(['created_at', 'id'])
      .where('id', '=', id)
      .where('tenant_id', '=', ctx.tenantId)
      .where('node_id', '=', ctx.input.nodeId)
      .executeTakeFirst(),
  );
  if (after) {
    query = query.where((eb) =>
      eb.or([
        eb('created_at', '<', after.created_at),
        eb.and([eb('created_at', '=', after.created_at), eb('id', '<', after.id)]),
      ]),
    );
  }
  return pageOf(await query.execute(), ctx.input.limit, workflowView);
}

export async function getWorkflow(ctx: CallContext<{ workflowId: string }>) {
  return workflowView(await loadWorkflow(workflowsDb(ctx.db), ctx.tenantId, ctx.input.workflowId));
}

const ALLOWED: Record<'abort' | 'pause' | 'resume' | 'retry', WorkflowRow['state'][]> = {
  pause: ['running'],
  resume: ['paused'],
  retry: ['failed'],
  abort: ['running', 'paused', 'failed'],
};

const HINT: Record<'abort' | 'pause' | 'resume' | 'retry', string> = {
  pause: 'Only a running workflow pauses.',
  resume: 'Only a paused workflow resumes.',
  retry: 'Only a failed workflow is retried (from its failed step).',
  abort: 'A workflow that succeeded or was aborted is finished.',
};

/**
 * Aborts a workflow (locked by the caller): the command of its current step is cancelled as
 * `commands.cancel` does (a queued one ends here, one the node holds is asked to drop it), the steps
 * left are skipped, its kind's `failed` hook runs, and `workflow.aborted` is emitted.
 */
async function abortWorkflowRow(
  ctx: { db: Kysely<ComputeTables>; emit: (event: CatalogEventDraft) => void; now: Date },
  row: WorkflowRow,
  why: string,
): Promise<WorkflowRow> {
  const steps = row.steps.map((s) => ({ ...s }));
  const current = steps[row.current_step];
  if (current?.commandId) await cancelForWorkflow(ctx.db, current.commandId, ctx.now);
  for (const s of steps)
    if (s.state === 'pending' || s.state === 'running')
      Object.assign(s, { state: 'skipped', finishedAt: iso(ctx.now) });
  const updated = await workflowsDb(ctx.db)
    .updateTable('compute.workflows')
    .set({ state: 'aborted', steps: JSON.stringify(steps), updated_at: ctx.now, finished_at: ctx.now })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  await hooksOf(row.kind).failed?.(
    { db: ctx.db, workflow: updated, steps, now: ctx.now, emit: ctx.emit },
    why,
  );
  ctx.emit(workflowEvent(row, 'aborted', { step: row.current_step }));
  return updated;
}

/** A workflow's state, or null when there is none (the metal module asks whether one still runs). */
export async function workflowStateOf(
  db: Kysely<ComputeTables>,
  workflowId: string,
): Promise<WorkflowRow['state'] | null> {
  const row = await workflowsDb(db)
    .selectFrom('compute.workflows')
    .select('state')
    .where('id', '=', workflowId)
    .executeTakeFirst();
  return row?.state ?? null;
}

/**
 * For another module (a bare-metal machine's abort): aborts the workflow while it runs or is
 * paused, whatever its command is doing; the node is asked to drop a command it holds. Answers
 * whether it aborted (false: the workflow had already ended).
 */
export async function abortWorkflowFor(
  ctx: { db: Kysely<ComputeTables>; emit: (event: CatalogEventDraft) => void; now: Date },
  workflowId: string,
  why: string,
): Promise<boolean> {
  const row = await workflowsDb(ctx.db)
    .selectFrom('compute.workflows')
    .selectAll()
    .where('id', '=', workflowId)
    .forUpdate()
    .executeTakeFirst();
  if (!row || (row.state !== 'running' && row.state !== 'paused')) return false;
  await abortWorkflowRow(ctx, row, why);
  return true;
}

/**
 * For another module (a rollout being aborted): aborts a node's workflow while none of its commands
 * has started on the node: its current step's command not yet made, queued, or sent and not yet
 * reported running (the node is asked to drop it, as `commands.cancel` does). Answers what it found,
 * or null when it left the workflow alone: finished, or a command already running or run (the node
 * finishes it).
 */
export async function abortWorkflowBeforeItRuns(
  ctx: { db: Kysely<ComputeTables>; emit: (event: CatalogEventDraft) => void; now: Date },
  workflowId: string,
  why: string,
): Promise<{ commandId: string | null; commandState: 'none' | 'queued' | 'sent' } | null> {
  const row = await workflowsDb(ctx.db)
    .selectFrom('compute.workflows')
    .selectAll()
    .where('id', '=', workflowId)
    .forUpdate()
    .executeTakeFirst();
  if (!row || (row.state !== 'running' && row.state !== 'paused')) return null;
  if (row.steps.slice(0, row.current_step).some((s) => s.commandId)) return null;
  const commandId = row.steps[row.current_step]?.commandId ?? null;
  const found = commandId ? await commandState(ctx.db, commandId) : 'none';
  if (found !== 'none' && found !== 'queued' && found !== 'sent') return null;
  await abortWorkflowRow(ctx, row, why);
  return { commandId, commandState: found };
}

/** Pause, resume, abort or retry; one transaction, one event. */
export async function steerWorkflow(
  ctx: CallContext<{ workflowId: string }>,
  action: 'abort' | 'pause' | 'resume' | 'retry',
) {
  const db = workflowsDb(ctx.db);
  const row = await loadWorkflow(db, ctx.tenantId, ctx.input.workflowId, true);
  if (!ALLOWED[action].includes(row.state)) {
    throw new ComputeError('INVALID_STATE', `workflow ${row.id} is ${row.state}; it cannot ${action}`, {
      details: { state: row.state },
      hint: HINT[action],
    });
  }
  const now = ctx.now();
  const steps = row.steps.map((s) => ({ ...s }));
  const current = steps[row.current_step];
  let state: WorkflowRow['state'] = row.state;
  let finishedAt: Date | null = row.finished_at;
  if (action === 'pause') state = 'paused';
  if (action === 'resume') state = 'running';
  if (action === 'retry') {
    state = 'running';
    finishedAt = null;
    if (current)
      Object.assign(current, {
        state: 'pending',
        attempt: current.attempt + 1,
        commandId: null,
        error: null,
        startedAt: null,
        finishedAt: null,
      });
  }
  if (action === 'abort') {
    const updated = await abortWorkflowRow(
      { db: ctx.db, now, emit: (event) => ctx.emit(event) },
      row,
      `workflow ${row.id} was aborted`,
    );
    return workflowView(updated);
  }
  const updated = await db
    .updateTable('compute.workflows')
    .set({ state, steps: JSON.stringify(steps), updated_at: now, finished_at: finishedAt })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  const past = ({ abort: 'aborted', pause: 'paused', resume: 'resumed', retry: 'retried' } as const)[action];
  ctx.emit(workflowEvent(row, past, { step: row.current_step }));
  if (state === 'running')
    await enqueueJob(ctx.db, { kind: WORKFLOW_JOB, payload: { workflowId: row.id }, runAt: now, wake: true });
  return workflowView(updated);
}

/**
 * A node's daemon said hello: its running workflows are woken, so one waiting for the daemon to
 * come back (node.wait-version, after an update) goes on now rather than at its next check. Every
 * running workflow of the node is woken, not only those at that step: one still finishing the step
 * before it (its transaction began before the hello) checks again once that transaction ends.
 */
export async function wakeNodeWorkflows(db: Kysely<ComputeTables>, nodeId: string, now: Date): Promise<void> {
  const running = await workflowsDb(db)
    .selectFrom('compute.workflows')
    .select('id')
    .where('node_id', '=', nodeId)
    .where('state', '=', 'running')
    .execute();
  for (const { id } of running)
    await enqueueJob(db, { kind: WORKFLOW_JOB, payload: { workflowId: id }, runAt: now, wake: true });
}
