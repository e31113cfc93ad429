/**
 * Workflows as rows: created by operators, steered (pause, resume, abort, retry from the failed
 * step) by methods, and advanced by the controller job (controller.ts). Each transition emits an
 * event in the transaction that makes it.
 */
import { ComputeError, newId } from '@better-compute/core';
import type { CatalogEventDraft, EventData, EventType } from '@better-compute/events';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { CallContext } from '../define-module.js';

type WorkflowEventName = EventType extends infer T ? (T extends `workflow.${infer S}` ? S : never) : never;
import { enqueueJob } from '../../workers/jobs.js';
import { hooksOf } from './hooks.js';
import { cancelForWorkflow } from '../commands/queries.js';
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

export function workflowView(row: WorkflowRow) {
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

/** A step that has the node run one command: `kind` with `payload`. */
export function commandStep(name: string, kind: string, payload: Record<string, unknown>): WorkflowStep {
  return step(name, 'command', { kind, payload });
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
  if (ctx.input.cursor) {
    const after = await db
      .selectFrom('compute.workflows')
      .select(['created_at', 'id'])
      .where('id', '=', ctx.input.cursor)
      .executeTakeFirst();
    if (!after) {
      throw new ComputeError('INVALID_ARGUMENT', 'the cursor names no workflow', {
        details: { field: 'cursor' },
        hint: 'Pass the nextCursor of the previous page, or leave --cursor out.',
      });
    }
    query = query.where((eb) =>
      eb.or([
        eb('created_at', '<', after.created_at),
        eb.and([eb('created_at', '=', after.created_at), eb('id', '<', after.id)]),
      ]),
    );
  }
  const rows = await query.execute();
  const page = rows.slice(0, ctx.input.limit);
  return {
    items: page.map(workflowView),
    nextCursor: rows.length > ctx.input.limit ? page.at(-1)!.id : null,
  };
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
    state = 'aborted';
    finishedAt = now;
    if (current?.commandId) await cancelForWorkflow(ctx.db, current.commandId, now);
    for (const s of steps)
      if (s.state === 'pending' || s.state === 'running')
        Object.assign(s, { state: 'skipped', finishedAt: iso(now) });
  }
  const updated = await db
    .updateTable('compute.workflows')
    .set({ state, steps: JSON.stringify(steps), updated_at: now, finished_at: finishedAt })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  if (action === 'abort') {
    const hooks = hooksOf(row.kind);
    await hooks.failed?.(
      { db: ctx.db, workflow: updated, steps, now, emit: (event) => ctx.emit(event as CatalogEventDraft) },
      `workflow ${row.id} was aborted`,
    );
  }
  const past = ({ abort: 'aborted', pause: 'paused', resume: 'resumed', retry: 'retried' } as const)[action];
  ctx.emit(workflowEvent(row, past, { step: row.current_step }));
  if (state === 'running')
    await enqueueJob(ctx.db, { kind: WORKFLOW_JOB, payload: { workflowId: row.id }, runAt: now, wake: true });
  return workflowView(updated);
}
