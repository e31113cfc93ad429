/**
 * Webhooks (`wh_…`), their deliveries (`msg_…`, one per webhook and event, the `webhook-id` every
 * attempt carries), each attempt's record, and the fan-out's cursor in the outbox. Never edit a
 * migration once it has landed; add one.
 */
import type { Migration } from '@better-compute/db';

export const webhooksMigrations: readonly Migration[] = [
  {
    name: '0001_webhooks',
    sql: `
create table compute.webhooks (
  id text primary key,
  tenant_id text not null,
  url text not null,
  events jsonb not null,
  description text not null default '',
  enabled boolean not null default true,
  disabled_reason text,
  secret_sealed text not null,
  previous_secret_sealed text,
  previous_secret_expires_at timestamptz,
  failing_since timestamptz,
  version integer not null default 1,
  created_at timestamptz not null,
  updated_at timestamptz not null
);
create index webhooks_tenant on compute.webhooks (tenant_id, id);

create table compute.webhook_deliveries (
  id text primary key,
  tenant_id text not null,
  webhook_id text not null references compute.webhooks (id) on delete cascade,
  event_id text not null,
  event_type text not null,
  body text not null,
  state text not null default 'pending' check (state in ('pending', 'succeeded', 'failed')),
  attempts integer not null default 0,
  schedule_step integer not null default 0,
  next_attempt_at timestamptz,
  locked_by text,
  locked_until timestamptz,
  created_at timestamptz not null,
  finished_at timestamptz,
  unique (webhook_id, event_id)
);
create index webhook_deliveries_due on compute.webhook_deliveries (next_attempt_at) where state = 'pending';
create index webhook_deliveries_webhook on compute.webhook_deliveries (webhook_id, id desc);
create index webhook_deliveries_finished on compute.webhook_deliveries (finished_at) where state <> 'pending';

create table compute.webhook_attempts (
  delivery_id text not null references compute.webhook_deliveries (id) on delete cascade,
  attempt integer not null,
  runner text not null,
  at timestamptz not null,
  status_code integer,
  duration_ms integer not null,
  success boolean not null,
  error text,
  response_excerpt text,
  primary key (delivery_id, attempt)
);

create table compute.webhook_cursor (
  name text primary key,
  tx_id xid8 not null,
  tx_index integer not null
);
`,
  },
];
