/**
 * What other modules read of workflows: the state of the workflows they started (a rollout follows
 * its nodes' update workflows) and, for a failed one, the error of the step that failed.
 */
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { type WorkflowRow, workflowsDb } from './tables.js';

export async function workflowOutcomes(
  db: Kysely<ComputeTables>,
  ids: readonly string[],
): Promise<Map<string, { state: WorkflowRow['state']; error: string | null }>> {
  const found = new Map<string, { state: WorkflowRow['state']; error: string | null }>();
  if (ids.length === 0) return found;
  const rows = await workflowsDb(db)
    .selectFrom('compute.workflows')
    .select(['id', 'state', 'steps', 'reason'])
    .where('id', 'in', [...ids])
    .execute();
  for (const row of rows) {
    const failed = row.steps.find((step) => step.state === 'failed');
    found.set(row.id, {
      state: row.state,
      error: failed
        ? `${failed.name}: ${failed.error ?? 'failed'}`
        : row.state === 'aborted'
          ? 'the workflow was aborted'
          : null,
    });
  }
  return found;
}
