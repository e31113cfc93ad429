/**
 * Confirmations (`cfm_…`): an agent's call held for its person (docs/confirmations.md). A
 * confirmation moves pending → approved → consumed, or to declined, expired or revoked, and only
 * forward. At most one pending or approved confirmation exists per delegation, method and input
 * digest. Never edit a migration once it has landed; add one.
 */
import type { Migration } from '@better-compute/db';

export const confirmationsMigrations: readonly Migration[] = [
  {
    name: '0001_confirmations',
    sql: `
create table compute.confirmations (
  id text primary key,
  seq bigserial not null unique,
  tenant_id text not null,
  delegation_id text not null,
  agent_id text not null,
  person_id text not null,
  method text not null,
  action text not null,
  resource jsonb not null,
  input_digest text not null check (input_digest ~ '^[0-9a-f]{64}$'),
  summary text not null,
  reason text not null,
  state text not null
    check (state in ('pending', 'approved', 'declined', 'expired', 'consumed', 'revoked')),
  created_at timestamptz not null,
  -- Pending: when it expires unanswered (an hour). Approved: the end of the retry's window.
  expires_at timestamptz not null,
  decided_at timestamptz,
  decided_by text,
  consumed_at timestamptz
);
create unique index confirmations_open on compute.confirmations (delegation_id, method, input_digest)
  where state in ('pending', 'approved');
create index confirmations_call on compute.confirmations (delegation_id, method, input_digest, seq desc);
create index confirmations_tenant on compute.confirmations (tenant_id, seq desc);
create index confirmations_person on compute.confirmations (tenant_id, person_id, seq desc);
create index confirmations_agent on compute.confirmations (tenant_id, agent_id, seq desc);
create index confirmations_open_by_tenant on compute.confirmations (tenant_id, delegation_id)
  where state in ('pending', 'approved');
`,
  },
];
