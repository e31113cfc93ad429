/**
 * Destructive batches (`batch_…`): the batch with the statement approvers sign (trust domain, root,
 * size, window end), its scope leaves in tree order, and the approvals submitted for it. Its member
 * commands are rows of compute.commands (the commands module's 0002), held until it is approved.
 * A batch moves pending → approved | cancelled | expired, and only forward. Never edit a migration
 * once it has landed; add one.
 */
import type { Migration } from '@better-compute/db';

export const batchesMigrations: readonly Migration[] = [
  {
    name: '0001_command_batches',
    sql: `
create table compute.command_batches (
  id text primary key,
  seq bigserial not null unique,
  tenant_id text not null,
  state text not null check (state in ('pending', 'approved', 'expired', 'cancelled')),
  reason text not null,
  created_by text not null,
  created_by_agent text,
  delegation_id text,
  proposed_by text not null,
  trust_domain text not null,
  root text not null check (root ~ '^[0-9a-f]{64}$'),
  size integer not null check (size >= 1),
  epoch integer not null check (epoch >= 1),
  kinds jsonb not null,
  approvals_needed integer not null check (approvals_needed >= 1),
  created_at timestamptz not null,
  not_after timestamptz not null check (not_after > created_at),
  approved_at timestamptz,
  ended_at timestamptz
);
create index command_batches_tenant on compute.command_batches (tenant_id, seq desc);
create index command_batches_pending on compute.command_batches (tenant_id, not_after) where state = 'pending';

-- A leaf's payload is null when the leaf is unbound (it admits any payload of its kind).
create table compute.command_batch_leaves (
  batch_id text not null references compute.command_batches (id),
  idx integer not null check (idx >= 0),
  subject text not null,
  kind text not null,
  payload jsonb,
  primary key (batch_id, idx)
);

-- One approval per key and batch: a replayed one is refused by the key.
create table compute.command_batch_approvals (
  batch_id text not null references compute.command_batches (id),
  kid text not null,
  signature text not null,
  approver text not null,
  epoch integer not null,
  at timestamptz not null,
  primary key (batch_id, kid)
);
`,
  },
];
