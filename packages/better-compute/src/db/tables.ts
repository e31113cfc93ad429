/** Kysely's view of the foundation's tables. */
import type { ColumnType, Generated } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

interface EventsTable {
  id: string;
  tx_id: Generated<string>;
  tx_index: number;
  tenant_id: string;
  type: string;
  subject_type: string;
  subject_id: string | null;
  data: ColumnType<Record<string, unknown>, string, string>;
  actor: string | null;
  request_id: string | null;
  occurred_at: Timestamp;
}

interface AuditEventsTable {
  id: string;
  tenant_id: string;
  actor: string | null;
  actor_kind: string | null;
  action: string;
  method: string;
  resource_type: string;
  resource_id: string | null;
  outcome: 'allowed' | 'denied' | 'failed';
  error_code: string | null;
  request_id: string;
  occurred_at: Timestamp;
  tx_id: Generated<string>;
  leaf_index: ColumnType<number | null, never, number | null>;
}

/** A sealed entry's place in its tenant's Merkle tree; never updated. */
interface AuditLeavesTable {
  tenant_id: string;
  leaf_index: ColumnType<number, number, never>;
  entry_id: string;
  leaf_hash: Uint8Array;
}

/** A signed checkpoint of a tenant's audit log; never updated. */
interface AuditCheckpointsTable {
  tenant_id: string;
  tree_size: ColumnType<number, number, never>;
  root_hash: Uint8Array;
  /** The C2SP signed note: the checkpoint body and its signature line. */
  note: string;
  /** The verifier key (c2sp.org/signed-note) that signed it. */
  signer: string;
  /** The roots of the tree's perfect subtrees, largest first (base64): where the next seal resumes. */
  frontier: ColumnType<string[], string, never>;
  /** The snapshot xmin of the seal: every entry of a transaction below it is in this tree. */
  sealed_below: string;
  created_at: Generated<Date>;
}

interface IdempotencyKeysTable {
  scope_hash: Buffer;
  tenant_id: string;
  method: string;
  input_hash: Buffer;
  /** The kept answer: a format byte, then its JSON (http/idempotency.ts, packAnswer). */
  answer: Buffer;
  created_at: Timestamp;
  expires_at: Timestamp;
}

interface JobsTable {
  id: string;
  kind: string;
  payload: ColumnType<Record<string, unknown>, string | undefined, string>;
  state: Generated<'queued' | 'running' | 'done' | 'failed'>;
  run_at: Timestamp;
  attempts: Generated<number>;
  max_attempts: Generated<number>;
  locked_by: string | null;
  locked_until: Timestamp | null;
  last_error: string | null;
  created_at: Timestamp;
  finished_at: Timestamp | null;
}

interface LeasesTable {
  name: string;
  holder: string;
  expires_at: Timestamp;
}

export interface ComputeTables {
  'compute.events': EventsTable;
  'compute.audit_events': AuditEventsTable;
  'compute.audit_leaves': AuditLeavesTable;
  'compute.audit_checkpoints': AuditCheckpointsTable;
  'compute.idempotency_keys': IdempotencyKeysTable;
  'compute.jobs': JobsTable;
  'compute.leases': LeasesTable;
}
