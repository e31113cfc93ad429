/**
 * doctor's `audit.sealed` check: entries waiting for a checkpoint longer than two checkpoint
 * intervals (plus a margin) mean no `controllers` replica seals, usually for want of the audit key
 * or the secret; a warning, since the log is intact but not yet tamper-evident.
 */
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import type { DoctorFinding } from '../types.js';

const MARGIN_MS = 5 * 60_000;

export async function auditSealFinding(
  db: Kysely<ComputeTables>,
  now: Date,
  everyMs: number,
): Promise<DoctorFinding> {
  // Raw SQL: two aggregates over the partial index of unsealed entries and the checkpoints.
  const { rows } = await sql<{ waiting: number; oldest: Date | null; checkpoints: number }>`
    select (select count(*)::int from compute.audit_events where leaf_index is null) as waiting,
      (select min(occurred_at) from compute.audit_events where leaf_index is null) as oldest,
      (select count(*)::int from compute.audit_checkpoints) as checkpoints`.execute(db);
  const { waiting, oldest, checkpoints } = rows[0]!;
  const late = oldest !== null && now.getTime() - new Date(oldest).getTime() > 2 * everyMs + MARGIN_MS;
  if (late) {
    return {
      check: 'audit.sealed',
      severity: 'warning',
      message: `${waiting} audit entr${waiting === 1 ? 'y waits' : 'ies wait'} for a checkpoint, the oldest since ${new Date(oldest).toISOString()}: run a controllers replica with the PKI bundle's audit key and BETTER_COMPUTE_SECRET, or \`better-compute audit checkpoint\``,
    };
  }
  return {
    check: 'audit.sealed',
    severity: 'ok',
    message: `${checkpoints} checkpoint(s) signed; ${waiting} entr${waiting === 1 ? 'y' : 'ies'} for the next`,
  };
}
