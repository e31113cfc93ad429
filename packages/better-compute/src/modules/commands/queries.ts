/**
 * What other modules read and change of the commands table beside queueing (service.ts): a
 * command's outcome for the workflow that waits on it, its result for the module whose step ran
 * it, the cancellation an aborted workflow asks for, and the simulated runtime's view. Nobody else
 * queries compute.commands (docs/architecture.md, "Who queries which table").
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { type CommandRow, commandsDb } from './tables.js';

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
