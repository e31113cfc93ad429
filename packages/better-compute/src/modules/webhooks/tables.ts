/** Kysely's view of the webhooks module's tables. */
import type { ColumnType, Kysely, Selectable } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

interface WebhooksTable {
  id: string;
  tenant_id: string;
  url: string;
  events: ColumnType<string[], string, string>;
  description: string;
  enabled: boolean;
  disabled_reason: string | null;
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_secret_expires_at: NullableTimestamp;
  failing_since: NullableTimestamp;
  version: ColumnType<number, number | undefined, number>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

interface WebhookDeliveriesTable {
  id: string;
  tenant_id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  body: string;
  state: ColumnType<
    'pending' | 'succeeded' | 'failed',
    'pending' | undefined,
    'pending' | 'succeeded' | 'failed'
  >;
  attempts: ColumnType<number, number | undefined, number>;
  schedule_step: ColumnType<number, number | undefined, number>;
  next_attempt_at: NullableTimestamp;
  locked_by: string | null;
  locked_until: NullableTimestamp;
  created_at: Timestamp;
  finished_at: NullableTimestamp;
}

interface WebhookAttemptsTable {
  delivery_id: string;
  attempt: number;
  runner: string;
  at: Timestamp;
  status_code: number | null;
  duration_ms: number;
  success: boolean;
  error: string | null;
  response_excerpt: string | null;
}

interface WebhookCursorTable {
  name: string;
  tx_id: string;
  tx_index: number;
}

interface WebhookTables extends ComputeTables {
  'compute.webhooks': WebhooksTable;
  'compute.webhook_deliveries': WebhookDeliveriesTable;
  'compute.webhook_attempts': WebhookAttemptsTable;
  'compute.webhook_cursor': WebhookCursorTable;
}

export type WebhooksDb = Kysely<WebhookTables>;
export const webhooksDb = (db: Kysely<ComputeTables>): WebhooksDb => db as unknown as WebhooksDb;
export type WebhookRow = Selectable<WebhooksTable>;
export type DeliveryRow = Selectable<WebhookDeliveriesTable>;
export type AttemptRow = Selectable<WebhookAttemptsTable>;
