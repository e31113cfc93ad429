/**
 * Commands as rows: created by the control plane (`commands.run`, workflows), read and cancelled
 * by operators, and moved forward by the gateway as the node's daemon reports. A state never
 * moves back, so a late or repeated report from the daemon cannot undo a result.
 */
import { ComputeError, isBootEntriesPayload, isStoredBmcPayload, newId } from '@better-compute/core';
import {
  COMMAND_KINDS,
  COMMAND_OUTPUT_LIMIT as LIMIT,
  type ROLLOUT_COMMAND_KINDS,
  type METAL_COMMAND_KINDS,
} from '@better-compute/core/methods';
import {
  isRuntimeCommandKind,
  isSandboxCommandKind,
  type RuntimeCommandKind,
  runtimeCommandPayloads,
  type SandboxCommandKind,
  sandboxCommandPayloads,
} from '@better-compute/core/runtime-commands';
import { type Kysely, sql } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { CatalogEventDraft } from '@better-compute/events';
import { cursorRow, pageOf } from '../../db/pages.js';
import type { CallContext } from '../define-module.js';
import { enqueueJob } from '../../workers/jobs.js';
import { WORKFLOW_JOB } from '../workflows/service.js';
import { findNode } from '../fleet/queries.js';
import { COMMANDS_CHANNEL, type CommandRow, commandsDb, type CommandsDb } from './tables.js';

export { COMMANDS_CHANNEL };

const DEFAULT_COMMAND_TTL_SECONDS = 900;
export type CommandKind =
  | (typeof COMMAND_KINDS)[number]
  | (typeof ROLLOUT_COMMAND_KINDS)[number]
  | (typeof METAL_COMMAND_KINDS)[number]
  | RuntimeCommandKind
  | SandboxCommandKind;
const FINAL = new Set(['succeeded', 'failed', 'cancelled']);

/**
 * The job a module wants queued when a command of its kind ends outside any workflow (a batch's
 * member: its workflow-less metal.bmc), so the thing the command changed is recorded as a
 * workflow's hook records it for the same command run directly. By command kind; a module
 * registers when it is loaded, as workflow hooks are.
 */
const endJobs = new Map<string, string>();

export function registerCommandEndJob(kind: string, jobKind: string): void {
  endJobs.set(kind, jobKind);
}

const iso = (value: Date | string) => new Date(value).toISOString();
const isoOrNull = (value: Date | string | null) => (value === null ? null : iso(value));

function commandView(row: CommandRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    nodeId: row.node_id,
    workflowId: row.workflow_id,
    kind: row.kind as CommandKind,
    payload: row.payload,
    state: row.state,
    attempt: row.attempt,
    cancelRequested: row.cancel_requested,
    exitCode: row.exit_code,
    stdout: row.stdout,
    stderr: row.stderr,
    result: row.result,
    error: row.error,
    createdAt: iso(row.created_at),
    expiresAt: iso(row.expires_at),
    sentAt: isoOrNull(row.sent_at),
    startedAt: isoOrNull(row.started_at),
    finishedAt: isoOrNull(row.finished_at),
  };
}

export type CommandView = ReturnType<typeof commandView>;

/** Output kept within the bound, cut at the end so the last lines (usually the error) survive. */
function boundOutput(text: string): string {
  return text.length <= LIMIT ? text : `[…${text.length - LIMIT} characters cut]\n${text.slice(-LIMIT)}`;
}

function commandNotFound(id: string) {
  return new ComputeError('NOT_FOUND', `command ${id} does not exist`, { details: { id } });
}

async function loadCommand(db: CommandsDb, tenantId: string, id: string, forUpdate = false) {
  let query = db
    .selectFrom('compute.commands')
    .selectAll()
    .where('id', '=', id)
    .where('tenant_id', '=', tenantId);
  if (forUpdate) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) throw commandNotFound(id);
  return row;
}

/** Queues a command for a node of the tenant. Used by `commands.run` and by workflow steps. */
export async function queueCommand(
  rawDb: Kysely<ComputeTables>,
  input: {
    tenantId: string;
    nodeId: string;
    kind: CommandKind;
    payload: Record<string, unknown>;
    ttlSeconds?: number | undefined;
    workflowId?: string | null;
    now: Date;
  },
  emit: (event: CatalogEventDraft) => void,
): Promise<CommandView> {
  const db = commandsDb(rawDb);
  const node = await findNode(rawDb, input.nodeId, input.tenantId);
  if (!node)
    throw new ComputeError('NOT_FOUND', `node ${input.nodeId} does not exist`, {
      details: { id: input.nodeId },
    });
  if (node.state === 'retired') {
    throw new ComputeError('INVALID_STATE', `node ${input.nodeId} is retired; it runs no commands`, {
      details: { state: node.state },
      hint: 'Send commands to a node that is not retired (better-compute nodes list).',
    });
  }
  const runtimeKind = isRuntimeCommandKind(input.kind) || isSandboxCommandKind(input.kind);
  if (runtimeKind) {
    // A runtime command's payload is checked here as the daemon checks it, so a workflow can never
    // queue one the node would refuse.
    const schema = isRuntimeCommandKind(input.kind)
      ? runtimeCommandPayloads[input.kind]
      : sandboxCommandPayloads[input.kind as SandboxCommandKind];
    const checked = schema.safeParse(input.payload);
    if (!checked.success)
      throw new ComputeError('INVALID_ARGUMENT', `a ${input.kind} command's payload is malformed`, {
        details: { field: 'payload', issues: checked.error.issues.map((i) => i.message).slice(0, 5) },
      });
  }
  const needsScript = input.kind === 'exec.script';
  // Runtime payloads were checked against their schemas above; ssh.trust's is built and checked
  // by the break-glass module that queues it.
  // bcd.update carries the signed release envelope the rollouts module read from the registry; the
  // daemon checks every byte of it against its own pins.
  // metal.bmc names a machine's BMC without its password (core's isStoredBmcPayload); metal.boot-entries
  // a site's bound MACs (core's isBootEntriesPayload).
  const payloadFits =
    runtimeKind ||
    input.kind === 'ssh.trust' ||
    (input.kind === 'metal.bmc' && isStoredBmcPayload(input.payload)) ||
    (input.kind === 'metal.boot-entries' && isBootEntriesPayload(input.payload)) ||
    (input.kind === 'bcd.update' &&
      typeof input.payload.release === 'object' &&
      input.payload.release !== null &&
      typeof input.payload.healthTimeoutSeconds === 'number' &&
      Object.keys(input.payload).length === 2) ||
    (needsScript
      ? typeof input.payload.script === 'string' && Object.keys(input.payload).length === 1
      : Object.keys(input.payload).length === 0);
  if (!payloadFits) {
    throw new ComputeError(
      'INVALID_ARGUMENT',
      needsScript ? 'an exec.script command names its script' : `a ${input.kind} command takes no payload`,
      {
        details: { field: 'payload' },
        hint: needsScript
          ? 'Pass payload {"script": NAME}, one of the maintenance scripts shipped with the daemon.'
          : 'Leave the payload out.',
      },
    );
  }
  const id = newId('command');
  const row = await db
    .insertInto('compute.commands')
    .values({
      id,
      tenant_id: input.tenantId,
      node_id: input.nodeId,
      workflow_id: input.workflowId ?? null,
      kind: input.kind,
      payload: JSON.stringify(input.payload),
      state: 'queued',
      created_at: input.now,
      expires_at: new Date(input.now.getTime() + (input.ttlSeconds ?? DEFAULT_COMMAND_TTL_SECONDS) * 1000),
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  // The gateway holding the node's session delivers it when this transaction commits.
  await sql`select pg_notify(${COMMANDS_CHANNEL}, ${input.nodeId})`.execute(db);
  emit({
    type: 'command.queued',
    tenantId: input.tenantId,
    subject: { type: 'command', id },
    data: { nodeId: input.nodeId, kind: input.kind },
  });
  return commandView(row);
}

export async function listCommands(
  ctx: CallContext<
    {
      nodeId: string;
      state?: CommandRow['state'] | undefined;
      limit: number;
      cursor?: string | undefined;
    },
    CatalogEventDraft
  >,
) {
  const db = commandsDb(ctx.db);
  let query = db
    .selectFrom('compute.commands')
    .selectAll()
    .where('tenant_id', '=', ctx.tenantId)
    .where('node_id', '=', ctx.input.nodeId)
    .orderBy('seq')
    .limit(ctx.input.limit + 1);
  if (ctx.input.state) query = query.where('state', '=', ctx.input.state);
  const after = await cursorRow(ctx.input.cursor, 'command of this node', (id) =>
    db
      .selectFrom('compute.commands')
      .select('seq')
      .where('id', '=', id)
      .where('tenant_id', '=', ctx.tenantId)
      .where('node_id', '=', ctx.input.nodeId)
      .executeTakeFirst(),
  );
  if (after) query = query.where('seq', '>', after.seq);
  return pageOf(await query.execute(), ctx.input.limit, commandView);
}

/** `commands.run`: an operator queues a command for a node's daemon. */
export async function runCommand(
  ctx: CallContext<
    {
      nodeId: string;
      kind: 'inventory.refresh' | 'exec.script';
      payload?: Record<string, unknown> | undefined;
      ttlSeconds?: number | undefined;
    },
    CatalogEventDraft
  >,
) {
  return queueCommand(
    ctx.db,
    {
      tenantId: ctx.tenantId,
      nodeId: ctx.input.nodeId,
      kind: ctx.input.kind,
      payload: ctx.input.payload ?? {},
      ttlSeconds: ctx.input.ttlSeconds,
      now: ctx.now(),
    },
    ctx.emit,
  );
}

export async function getCommand(ctx: CallContext<{ commandId: string }>) {
  return commandView(await loadCommand(commandsDb(ctx.db), ctx.tenantId, ctx.input.commandId));
}

/**
 * A queued command (not yet delivered) is cancelled at once; a delivered one is asked to stop, and
 * the daemon reports it cancelled (dropped from its queue, or stopped while it ran).
 */
export async function cancelCommand(ctx: CallContext<{ commandId: string }>) {
  const db = commandsDb(ctx.db);
  const row = await loadCommand(db, ctx.tenantId, ctx.input.commandId, true);
  if (FINAL.has(row.state)) {
    throw new ComputeError(
      'INVALID_STATE',
      `command ${row.id} is ${row.state}; only an unfinished command is cancelled`,
      {
        details: { state: row.state },
        hint: `Read it with better-compute commands get ${row.id}.`,
      },
    );
  }
  const now = ctx.now();
  const running = row.state !== 'queued';
  const updated = await db
    .updateTable('compute.commands')
    .set(
      running
        ? { cancel_requested: true }
        : { cancel_requested: true, state: 'cancelled', finished_at: now, error: 'cancelled before it ran' },
    )
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  // A workflow waiting for a command cancelled before it ran goes on now, as advanceCommand wakes it.
  if (!running && updated.workflow_id)
    await enqueueJob(ctx.db, {
      kind: WORKFLOW_JOB,
      payload: { workflowId: updated.workflow_id },
      runAt: now,
      wake: true,
    });
  ctx.emit({
    type: running ? 'command.cancel_requested' : 'command.cancelled',
    subject: { type: 'command', id: row.id },
    data: { nodeId: row.node_id },
  });
  return commandView(updated);
}

/**
 * The gateway's side: the unfinished commands of the nodes it holds, in each node's order. A held
 * command (a member of a batch not yet approved) is never among them.
 */
export async function openCommands(rawDb: Kysely<ComputeTables>, nodeIds: readonly string[], limit = 20_000) {
  if (nodeIds.length === 0) return [];
  return commandsDb(rawDb)
    .selectFrom('compute.commands')
    .selectAll()
    .where('node_id', 'in', nodeIds)
    .where('state', 'in', ['queued', 'sent', 'running'])
    .where('held', '=', false)
    .orderBy('seq')
    .limit(limit)
    .execute();
}

/**
 * Marks delivered commands sent (one statement for a whole delivery pass). Answers the ids that
 * were no longer queued: cancelled (or expired) between the read and the send, so the daemon holds
 * a command that must not run and the gateway tells it so.
 */
export async function markSent(
  rawDb: Kysely<ComputeTables>,
  ids: readonly string[],
  at: Date,
): Promise<string[]> {
  if (ids.length === 0) return [];
  const marked = await commandsDb(rawDb)
    .updateTable('compute.commands')
    .set((eb) => ({ state: 'sent', sent_at: at, attempt: eb('attempt', '+', 1) }))
    .where('id', 'in', ids)
    .where('state', '=', 'queued')
    .returning('id')
    .execute();
  const sent = new Set(marked.map((row) => row.id));
  return ids.filter((id) => !sent.has(id));
}

/**
 * Fails a queued command that is not sent, saying why: its expiry passed before it could be
 * delivered (expireCommand), or the gateway could not make its signed message.
 */
export async function failUnsent(
  db: Kysely<ComputeTables>,
  nodeId: string,
  commandId: string,
  at: Date,
  error: string,
): Promise<void> {
  await advanceCommand(db, nodeId, commandId, {
    state: 'failed',
    at,
    exitCode: null,
    stdout: '',
    stderr: '',
    result: null,
    error,
  });
}

/**
 * Fails a queued command whose expiry passed before it could be delivered, as a gateway does
 * rather than send it (and the simulator's site agent, which takes commands as a gateway hands them).
 */
export function expireCommand(db: Kysely<ComputeTables>, nodeId: string, commandId: string, at: Date) {
  return failUnsent(db, nodeId, commandId, at, 'expired before it was delivered');
}

/**
 * Moves a command forward; a report for a final command, or one going backwards, changes nothing,
 * and neither does one for a held command (it was never sent: only the batch's approval or its end
 * moves it).
 */
export async function advanceCommand(
  rawDb: Kysely<ComputeTables>,
  nodeId: string,
  commandId: string,
  change:
    | { state: 'sent'; at: Date }
    | { state: 'running'; at: Date }
    | {
        state: 'succeeded' | 'failed' | 'cancelled';
        at: Date;
        exitCode: number | null;
        stdout: string;
        stderr: string;
        result: Record<string, unknown> | null;
        error: string | null;
      },
): Promise<CommandRow | undefined> {
  const db = commandsDb(rawDb);
  const from =
    change.state === 'sent'
      ? ['queued']
      : change.state === 'running'
        ? ['queued', 'sent']
        : ['queued', 'sent', 'running'];
  const set =
    change.state === 'sent'
      ? { state: 'sent' as const, sent_at: change.at, attempt: sql<number>`attempt + 1` }
      : change.state === 'running'
        ? { state: 'running' as const, started_at: change.at }
        : {
            state: change.state,
            finished_at: change.at,
            exit_code: change.exitCode,
            stdout: boundOutput(change.stdout),
            stderr: boundOutput(change.stderr),
            result: change.result === null ? null : JSON.stringify(change.result),
            error: change.error === null ? null : change.error.slice(0, 2000),
          };
  const row = await db
    .updateTable('compute.commands')
    .set(set as never)
    .where('id', '=', commandId)
    .where('node_id', '=', nodeId)
    .where('state', 'in', from as CommandRow['state'][])
    .where('held', '=', false)
    .returningAll()
    .executeTakeFirst();
  // A workflow waiting for this command goes on now rather than at its next check.
  if (row?.workflow_id && FINAL.has(row.state))
    await enqueueJob(rawDb, {
      kind: WORKFLOW_JOB,
      payload: { workflowId: row.workflow_id },
      runAt: change.at,
      wake: true,
    });
  const endJob = row && !row.workflow_id && FINAL.has(row.state) ? endJobs.get(row.kind) : undefined;
  if (endJob)
    await enqueueJob(rawDb, { kind: endJob, payload: { commandId: row!.id }, runAt: change.at, wake: true });
  return row;
}
