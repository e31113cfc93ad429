/** Kysely's view of the batches module's tables. */
import type { ColumnType, Generated, Kysely, Selectable } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

export type BatchState = 'pending' | 'approved' | 'expired' | 'cancelled';
export type KindCount = { kind: string; count: number };

interface CommandBatchesTable {
  id: string;
  seq: Generated<string>;
  tenant_id: string;
  state: BatchState;
  reason: string;
  created_by: string;
  created_by_agent: string | null;
  delegation_id: string | null;
  proposed_by: string;
  trust_domain: string;
  /** The RFC 6962 root of the leaves, 64 lowercase hex digits. */
  root: string;
  size: number;
  epoch: number;
  kinds: ColumnType<KindCount[], string, string>;
  approvals_needed: number;
  created_at: Timestamp;
  not_after: Timestamp;
  approved_at: NullableTimestamp;
  ended_at: NullableTimestamp;
}

interface CommandBatchLeavesTable {
  batch_id: string;
  idx: number;
  subject: string;
  kind: string;
  /** Null for an unbound leaf. */
  payload: ColumnType<Record<string, string> | null, string | null, never>;
}

interface CommandBatchApprovalsTable {
  batch_id: string;
  kid: string;
  signature: string;
  /** The principal that submitted it. */
  approver: string;
  /** The approver set's epoch it was checked against. */
  epoch: number;
  at: Timestamp;
}

interface BatchTables extends ComputeTables {
  'compute.command_batches': CommandBatchesTable;
  'compute.command_batch_leaves': CommandBatchLeavesTable;
  'compute.command_batch_approvals': CommandBatchApprovalsTable;
}

export type BatchRow = Selectable<CommandBatchesTable>;
export type ApprovalRow = Selectable<CommandBatchApprovalsTable>;
export type BatchesDb = Kysely<BatchTables>;
export const batchesDb = (db: Kysely<ComputeTables>): BatchesDb => db as unknown as BatchesDb;
