/**
 * What other modules read and change of the commands table beside queueing (service.ts): a
 * command's outcome for the workflow that waits on it, its result for the module whose step ran
 * it, how a workflow-less command ended for the module whose end job it queued (a batch member's
 * metal.bmc), the cancellation an aborted workflow asks for, the simulated runtime's view, and the held
 * members of a destructive batch (modules/batches). Nobody else queries compute.commands (docs/architecture.md, "Who queries which table").
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { COMMANDS_CHANNEL, type CommandRow, commandsDb } from './tables.js';

/** What a finished (or unfinished) command came to; undefined when there is no such command. */
export async function commandOutcome(
  db: Kysely<ComputeTables>,
  commandId: string,
): Promise<Pick<CommandRow, 'state' | 'error' | 'exit_code'> | undefined> {
  return commandsDb(db)
    .selectFrom('compute.commands')
    .select(['state', 'error', 'exit_code'])
    .where('id', '=', commandId)
    .executeTakeFirst();
}

/** A command's kind, payload and how it ended, for the module whose end job it queued. */
export async function endedCommand(
  db: Kysely<ComputeTables>,
  commandId: string,
): Promise<
  | Pick<CommandRow, 'id' | 'tenant_id' | 'kind' | 'payload' | 'state' | 'result' | 'error' | 'batch_id'>
  | undefined
> {
  return commandsDb(db)
    .selectFrom('compute.commands')
    .select(['id', 'tenant_id', 'kind', 'payload', 'state', 'result', 'error', 'batch_id'])
    .where('id', '=', commandId)
    .executeTakeFirst();
}

/** The result the node reported for a command, or null (none yet, or no such command). */
export async function commandResult(
  db: Kysely<ComputeTables>,
  commandId: string,
): Promise<Record<string, unknown> | null> {
  const command = await commandsDb(db)
    .selectFrom('compute.commands')
    .select('result')
    .where('id', '=', commandId)
    .executeTakeFirst();
  return command?.result ?? null;
}

/** A command's state, locked until the caller's transaction ends; null when there is no such command. */
export async function commandState(
  db: Kysely<ComputeTables>,
  commandId: string,
): Promise<CommandRow['state'] | null> {
  const row = await commandsDb(db)
    .selectFrom('compute.commands')
    .select('state')
    .where('id', '=', commandId)
    .forUpdate()
    .executeTakeFirst();
  return row?.state ?? null;
}

/**
 * Cancels a command its aborted workflow no longer wants: a queued one ends here, one the node has
 * (sent or running) is asked to stop; a finished one is left as it is.
 */
export async function cancelForWorkflow(
  db: Kysely<ComputeTables>,
  commandId: string,
  now: Date,
): Promise<void> {
  await commandsDb(db)
    .updateTable('compute.commands')
    .set({ state: 'cancelled', cancel_requested: true, finished_at: now, error: 'its workflow was aborted' })
    .where('id', '=', commandId)
    .where('state', '=', 'queued')
    .execute();
  await commandsDb(db)
    .updateTable('compute.commands')
    .set({ cancel_requested: true })
    .where('id', '=', commandId)
    .where('state', 'in', ['sent', 'running'])
    .execute();
}

/** A command, locked until the caller's transaction ends: the simulated runtime completing it. */
export async function lockCommand(
  db: Kysely<ComputeTables>,
  commandId: string,
): Promise<CommandRow | undefined> {
  return commandsDb(db)
    .selectFrom('compute.commands')
    .selectAll()
    .where('id', '=', commandId)
    .forUpdate()
    .executeTakeFirst();
}

/** Whether an `image.fetch` of the image succeeded on the node before: it is in the node's cache. */
export async function imageFetchedOn(
  db: Kysely<ComputeTables>,
  nodeId: string,
  imageId: string,
): Promise<boolean> {
  const fetched = await commandsDb(db)
    .selectFrom('compute.commands')
    .select('id')
    .where('node_id', '=', nodeId)
    .where('kind', '=', 'image.fetch')
    .where('state', '=', 'succeeded')
    .where(sql<boolean>`payload->'image'->>'imageId' = ${imageId}`)
    .executeTakeFirst();
  return fetched !== undefined;
}

/**
 * A member of a destructive batch (modules/batches) as it is created: queued and held, expiring with
 * the batch's window, with its leaf's place in the batch's tree and inclusion proof (hex).
 */
export interface HeldCommand {
  id: string;
  tenantId: string;
  nodeId: string;
  kind: string;
  payload: Record<string, unknown>;
  batchId: string;
  index: number;
  proof: string[];
}

/** Inserts a batch's members, held: nothing delivers them until the batch releases them. */
export async function insertHeldCommands(
  db: Kysely<ComputeTables>,
  members: readonly HeldCommand[],
  now: Date,
  expiresAt: Date,
): Promise<void> {
  if (members.length === 0) return;
  await commandsDb(db)
    .insertInto('compute.commands')
    .values(
      members.map((member) => ({
        id: member.id,
        tenant_id: member.tenantId,
        node_id: member.nodeId,
        workflow_id: null,
        kind: member.kind,
        payload: JSON.stringify(member.payload),
        state: 'queued' as const,
        created_at: now,
        expires_at: expiresAt,
        batch_id: member.batchId,
        batch_index: member.index,
        batch_proof: JSON.stringify(member.proof),
        held: true,
      })),
    )
    .execute();
}

/** A batch's members in leaf order (its approval carries out the ones the control plane runs). */
export async function batchCommands(db: Kysely<ComputeTables>, batchId: string): Promise<CommandRow[]> {
  return commandsDb(db)
    .selectFrom('compute.commands')
    .selectAll()
    .where('batch_id', '=', batchId)
    .orderBy('batch_index')
    .execute();
}

/**
 * Ends a held member the control plane carried out itself when its batch was approved (a node
 * deletion): it is released and final at once, so no gateway ever sends it.
 */
export async function settleHeldCommand(
  db: Kysely<ComputeTables>,
  commandId: string,
  outcome: { state: 'succeeded' | 'failed'; error: string | null; result: Record<string, unknown> | null },
  now: Date,
): Promise<void> {
  await commandsDb(db)
    .updateTable('compute.commands')
    .set({
      held: false,
      state: outcome.state,
      started_at: now,
      finished_at: now,
      error: outcome.error === null ? null : outcome.error.slice(0, 2000),
      result: outcome.result === null ? null : JSON.stringify(outcome.result),
    })
    .where('id', '=', commandId)
    .where('held', '=', true)
    .where('state', '=', 'queued')
    .execute();
}

/**
 * Releases a batch's held members (it was approved): the gateways holding their nodes deliver them
 * from the commit on, woken on the channel `queueCommand` uses. Answers how many were released.
 */
export async function releaseHeldCommands(db: Kysely<ComputeTables>, batchId: string): Promise<number> {
  const released = await commandsDb(db)
    .updateTable('compute.commands')
    .set({ held: false })
    .where('batch_id', '=', batchId)
    .where('held', '=', true)
    .returning('node_id')
    .execute();
  const nodes = [...new Set(released.map((row) => row.node_id))];
  if (nodes.length > 0)
    await sql`select pg_notify(${COMMANDS_CHANNEL}, node) from unnest(${nodes}::text[]) as node`.execute(db);
  return released.length;
}

/** Cancels a batch's held members (it was cancelled or expired): they never run. */
export async function cancelHeldCommands(
  db: Kysely<ComputeTables>,
  batchId: string,
  now: Date,
  error: string,
): Promise<number> {
  const cancelled = await commandsDb(db)
    .updateTable('compute.commands')
    .set({ held: false, state: 'cancelled', cancel_requested: true, finished_at: now, error })
    .where('batch_id', '=', batchId)
    .where('held', '=', true)
    .where('state', '=', 'queued')
    .returning('id')
    .execute();
  return cancelled.length;
}

/** A page of a batch's members in leaf order, after the member `cursor` names. */
export async function batchCommandsPage(
  db: Kysely<ComputeTables>,
  batchId: string,
  page: { state?: CommandRow['state'] | undefined; limit: number; afterIndex: number | null },
): Promise<CommandRow[]> {
  let query = commandsDb(db)
    .selectFrom('compute.commands')
    .selectAll()
    .where('batch_id', '=', batchId)
    .orderBy('batch_index')
    .limit(page.limit + 1);
  if (page.state) query = query.where('state', '=', page.state);
  if (page.afterIndex !== null) query = query.where('batch_index', '>', page.afterIndex);
  return query.execute();
}

/** A member's index in its batch, or undefined when the command is not one of the batch's. */
export async function batchCommandIndex(
  db: Kysely<ComputeTables>,
  batchId: string,
  commandId: string,
): Promise<number | undefined> {
  const row = await commandsDb(db)
    .selectFrom('compute.commands')
    .select('batch_index')
    .where('id', '=', commandId)
    .where('batch_id', '=', batchId)
    .executeTakeFirst();
  return row?.batch_index ?? undefined;
}

/**
 * The version a node's daemon said in its last Hello and when that session began; null when it
 * never connected. A rollout's workflow waits on it (the node is back with the new version).
 */
export async function nodeDaemonVersion(
  db: Kysely<ComputeTables>,
  nodeId: string,
): Promise<{ version: string; connectedAt: Date } | null> {
  const row = await commandsDb(db)
    .selectFrom('compute.node_sessions')
    .select(['daemon_version', 'connected_at'])
    .where('node_id', '=', nodeId)
    .executeTakeFirst();
  return row ? { version: row.daemon_version, connectedAt: new Date(row.connected_at) } : null;
}

/** The commands of a node that failed after `since` (their ids and errors, the first few). */
export async function failedCommandsSince(
  db: Kysely<ComputeTables>,
  nodeId: string,
  since: Date,
): Promise<{ id: string; kind: string; error: string | null }[]> {
  return commandsDb(db)
    .selectFrom('compute.commands')
    .select(['id', 'kind', 'error'])
    .where('node_id', '=', nodeId)
    .where('state', '=', 'failed')
    .where('finished_at', '>=', since)
    .orderBy('finished_at')
    .limit(5)
    .execute();
}

/**
 * The latest commands of `kind` queued since `since` on any of `nodeIds`, newest first by each
 * node's sequence (a few): how
 * the metal module learns whether a site agent has applied the boot entries a workflow waits for.
 */
export async function recentCommandsOfKind(
  db: Kysely<ComputeTables>,
  nodeIds: readonly string[],
  kind: string,
  since: Date,
): Promise<Pick<CommandRow, 'id' | 'node_id' | 'state' | 'payload' | 'error'>[]> {
  if (nodeIds.length === 0) return [];
  return commandsDb(db)
    .selectFrom('compute.commands')
    .select(['id', 'node_id', 'state', 'payload', 'error'])
    .where('node_id', 'in', [...nodeIds])
    .where('kind', '=', kind)
    .where('created_at', '>=', since)
    .orderBy('seq', 'desc')
    .limit(8)
    .execute();
}
