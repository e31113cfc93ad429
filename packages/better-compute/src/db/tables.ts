/** Kysely's view of the foundation's tables. */
import type { ColumnType, Generated } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

export interface EventsTable {
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

export interface AuditEventsTable {
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
}

export interface IdempotencyKeysTable {
  scope_hash: string;
  tenant_id: string;
  method: string;
  input_hash: string;
  response: ColumnType<unknown, string | null, string | null>;
  created_at: Timestamp;
  expires_at: Timestamp;
}

export interface JobsTable {
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

export interface LeasesTable {
  name: string;
  holder: string;
  expires_at: Timestamp;
}

export interface ComputeTables {
  'compute.events': EventsTable;
  'compute.audit_events': AuditEventsTable;
  'compute.idempotency_keys': IdempotencyKeysTable;
  'compute.jobs': JobsTable;
  'compute.leases': LeasesTable;
}
