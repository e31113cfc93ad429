/**
 * Commands (`cmd_…`) and the node sessions the gateway holds. A command's `seq` orders delivery
 * to its node; its state moves queued → sent → running → succeeded | failed | cancelled, and only
 * forward. Never edit a migration once it has landed; add one.
 */
import type { Migration } from '@better-compute/db';

export const commandsMigrations: readonly Migration[] = [
  {
    name: '0001_commands',
    sql: `
create table compute.commands (
  id text primary key,
  seq bigserial not null unique,
  tenant_id text not null,
  node_id text not null,
  workflow_id text,
  kind text not null,
  payload jsonb not null default '{}'::jsonb,
  state text not null default 'queued'
    check (state in ('queued', 'sent', 'running', 'succeeded', 'failed', 'cancelled')),
  attempt integer not null default 0,
  cancel_requested boolean not null default false,
  exit_code integer,
  stdout text not null default '',
  stderr text not null default '',
  result jsonb,
  error text,
  created_at timestamptz not null,
  expires_at timestamptz not null,
  sent_at timestamptz,
  started_at timestamptz,
  finished_at timestamptz
);
create index commands_node_seq on compute.commands (node_id, seq);
create index commands_open on compute.commands (node_id, seq) where state in ('queued', 'sent', 'running');

create table compute.node_sessions (
  node_id text primary key,
  tenant_id text not null,
  gateway_id text not null,
  daemon_version text not null,
  capabilities jsonb not null default '[]'::jsonb,
  hardware jsonb not null default '{}'::jsonb,
  connected_at timestamptz not null,
  last_seen_at timestamptz not null
);
`,
  },
  {
    // A batch's member commands (modules/batches): held until a threshold of approvers signed the
    // batch, with their place in its tree and the leaf's inclusion proof, which the gateway sends
    // beside the command so the daemon checks it without the rest of the scope.
    name: '0002_batch_members',
    sql: `
alter table compute.commands
  add column batch_id text,
  add column batch_index integer,
  add column batch_proof jsonb,
  add column held boolean not null default false,
  add constraint commands_batch_member check (
    (batch_id is null and batch_index is null and batch_proof is null and not held)
    or (batch_id is not null and batch_index is not null and batch_proof is not null)
  );
create unique index commands_batch_members on compute.commands (batch_id, batch_index) where batch_id is not null;
`,
  },
];
