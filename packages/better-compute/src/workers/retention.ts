/**
 * Outbox retention (`events.retention` in the configuration): the maintenance pass deletes events
 * older than the retention from `compute.events`, a bounded batch at a time. It never touches the
 * audit log: `compute.audit_events`, its leaves and its checkpoints are kept whatever the retention,
 * since a sealed entry deleted would break every proof and `audit verify` (docs/audit.md).
 */
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import { SETTLED_HORIZON } from '../db/settled.js';

/** The most events one pass deletes, so a first run on a large outbox never holds a long lock. */
const RETENTION_BATCH = 5_000;

/**
 * Deletes up to `batch` events that occurred before `before`, and only of transactions below the
 * oldest still running (a reader's position is never overtaken by a delete). Answers how many.
 */
export async function purgeOldEvents(
  db: Kysely<ComputeTables>,
  before: Date,
  batch = RETENTION_BATCH,
): Promise<number> {
  // Raw SQL: a bounded delete by the primary key, with the snapshot's xmin.
  const result = await sql`
    delete from compute.events where (tx_id, tx_index) in (
      select tx_id, tx_index from compute.events
      where occurred_at < ${before} and tx_id < ${SETTLED_HORIZON}
      order by tx_id, tx_index
      limit ${batch})`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}
