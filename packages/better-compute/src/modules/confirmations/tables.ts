/** Kysely's view of the confirmations module's table. */
import type { ColumnType, Generated, Kysely, Selectable } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

export type ConfirmationState = 'pending' | 'approved' | 'declined' | 'expired' | 'consumed' | 'revoked';

interface ConfirmationsTable {
  id: string;
  seq: Generated<string>;
  tenant_id: string;
  delegation_id: string;
  agent_id: string;
  person_id: string;
  method: string;
  action: string;
  resource: ColumnType<{ type: string; id?: string }, string, never>;
  /** SHA-256 of the canonical validated input, 64 lowercase hex digits. */
  input_digest: string;
  summary: string;
  reason: string;
  state: ConfirmationState;
  created_at: Timestamp;
  expires_at: Timestamp;
  decided_at: NullableTimestamp;
  decided_by: string | null;
  consumed_at: NullableTimestamp;
}

interface ConfirmationTables extends ComputeTables {
  'compute.confirmations': ConfirmationsTable;
}

export type ConfirmationRow = Selectable<ConfirmationsTable>;
export type ConfirmationsDb = Kysely<ConfirmationTables>;
export const confirmationsDb = (db: Kysely<ComputeTables>): ConfirmationsDb =>
  db as unknown as ConfirmationsDb;
