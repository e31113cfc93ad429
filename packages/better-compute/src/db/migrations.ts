/**
 * The foundation's tables in schema `compute`: the outbox of events, the audit log and its seal
 * (leaves and signed checkpoints), idempotency keys, background jobs and leader leases. Never edit a migration once it has landed; add one.
 */
import type { ModuleMigrations } from '@better-compute/db';

export const foundationMigrations: ModuleMigrations = {
  module: 'compute',
  migrations: [
    {
      name: '0001_foundation',
      sql: `
create schema if not exists compute;

-- The outbox. An event's position is the id of the transaction that wrote it and its index in that
-- transaction; readers only read below the oldest transaction still running, so a transaction that
-- commits late with a lower position can never be skipped.
create table compute.events (
  id text primary key,
  tx_id xid8 not null default pg_current_xact_id(),
  tx_index integer not null,
  tenant_id text not null,
  type text not null,
  subject_type text not null,
  subject_id text,
  data jsonb not null default '{}'::jsonb,
  actor text,
  request_id text,
  occurred_at timestamptz not null default now(),
  unique (tx_id, tx_index)
);
create index events_tenant_position on compute.events (tenant_id, tx_id, tx_index);

create table compute.audit_events (
  id text primary key,
  tenant_id text not null,
  actor text,
  actor_kind text,
  action text not null,
  method text not null,
  resource_type text not null,
  resource_id text,
  outcome text not null check (outcome in ('allowed', 'denied', 'failed')),
  error_code text,
  request_id text not null,
  occurred_at timestamptz not null default now()
);
create index audit_events_tenant_time on compute.audit_events (tenant_id, occurred_at);

create table compute.idempotency_keys (
  scope_hash text primary key,
  tenant_id text not null,
  method text not null,
  input_hash text not null,
  response jsonb,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);
create index idempotency_keys_expiry on compute.idempotency_keys (expires_at);

create table compute.jobs (
  id text primary key,
  kind text not null,
  payload jsonb not null default '{}'::jsonb,
  state text not null default 'queued' check (state in ('queued', 'running', 'done', 'failed')),
  run_at timestamptz not null default now(),
  attempts integer not null default 0,
  max_attempts integer not null default 5,
  locked_by text,
  locked_until timestamptz,
  last_error text,
  created_at timestamptz not null default now(),
  finished_at timestamptz
);
create index jobs_claimable on compute.jobs (kind, run_at) where state in ('queued', 'running');

create table compute.leases (
  name text primary key,
  holder text not null,
  expires_at timestamptz not null
);
`,
    },
    {
      // An event is read by its position, never by its id (unique by construction), so the position
      // is the primary key and the id needs no index of its own: one index entry fewer per event,
      // and a call writes one to three events (docs/decisions/reserve-writes.md).
      name: '0002_event_position_key',
      sql: `
alter table compute.events
  drop constraint events_pkey,
  drop constraint events_tx_id_tx_index_key,
  add constraint events_pkey primary key (tx_id, tx_index);
`,
    },
    {
      // The seal of the audit log (docs/audit.md). An entry keeps the transaction that wrote it, so a
      // checkpoint takes only entries below the oldest transaction still running (one committing late
      // is sealed by the next checkpoint, never skipped), and its leaf index once sealed. The leaves
      // and checkpoints are kept per tenant; nothing here is ever updated or deleted.
      name: '0003_audit_seal',
      sql: `
alter table compute.audit_events
  add column tx_id xid8 not null default pg_current_xact_id(),
  add column leaf_index bigint;
create index audit_events_unsealed on compute.audit_events (tenant_id, tx_id) where leaf_index is null;

create table compute.audit_leaves (
  tenant_id text not null,
  leaf_index bigint not null,
  entry_id text not null,
  leaf_hash bytea not null,
  primary key (tenant_id, leaf_index)
);

create table compute.audit_checkpoints (
  tenant_id text not null,
  tree_size bigint not null,
  root_hash bytea not null,
  note text not null,
  signer text not null,
  frontier jsonb not null,
  sealed_below xid8 not null,
  created_at timestamptz not null default now(),
  primary key (tenant_id, tree_size)
);
`,
    },
    {
      // Readers of the outbox and the audit log stop below the oldest transaction still running,
      // and PostgreSQL's snapshot xmin counts every database of the cluster: one long write in
      // another database held every live stream, webhook and seal of this one back. Only this
      // database's transactions can write these rows, so the horizon leaves out the transactions
      // the server's activity view shows in another database; one it cannot place still counts.
      // Callers take it once per statement: \`(select compute.settled_horizon())\`.
      name: '0004_settled_horizon',
      sql: `
create function compute.settled_horizon() returns xid8 language sql stable as $$
  select coalesce(min(running), pg_snapshot_xmax(pg_current_snapshot()))
  from pg_snapshot_xip(pg_current_snapshot()) as running
  where (running::text::numeric % 4294967296)::bigint not in (
    select backend_xid::text::bigint from pg_stat_activity
    where backend_xid is not null
      and datid is distinct from (select oid from pg_database where datname = current_database()))
$$;
`,
    },
    {
      // Every create writes one key row, and a reservation's answer alone is about 0.8 KiB of jsonb.
      // The row now holds its two SHA-256 hashes as bytes rather than hex, and the answer behind a
      // format byte, compressed by the server (http/idempotency.ts); keys kept from before become
      // format 0, their JSON as it was. Expiry is in insertion order, so the purge's index is a
      // BRIN one, which a new row almost never writes to.
      name: '0005_idempotency_compact',
      sql: `
alter table compute.idempotency_keys
  alter column scope_hash type bytea using decode(scope_hash, 'hex'),
  alter column input_hash type bytea using decode(input_hash, 'hex'),
  add column answer bytea;
update compute.idempotency_keys
  set answer = '\\x00'::bytea || convert_to(coalesce(response, 'null'::jsonb)::text, 'UTF8');
alter table compute.idempotency_keys drop column response, alter column answer set not null;
drop index compute.idempotency_keys_expiry;
create index idempotency_keys_expiry on compute.idempotency_keys using brin (expires_at);
`,
    },
  ],
};
