/**
 * Provider accounts (`pacct_…`) and their bootstraps (`pboot_…`). An account's document is kept as
 * the JSON text the method's schema gave; its credentials in it are secret references only. A
 * bootstrap keeps each host's state as JSON text, so a job that is claimed again after a crash goes
 * on from where the last one stopped. Never edit a migration once it has landed; add one.
 */
import type { Migration } from '@better-compute/db';

export const providerAccountsMigrations: readonly Migration[] = [
  {
    name: '0001_provider_accounts',
    sql: `
create table compute.provider_accounts (
  id text primary key,
  tenant_id text not null,
  name text not null,
  driver text not null,
  version integer not null check (version >= 1),
  config text not null,
  created_by text,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  unique (tenant_id, name)
);
create index provider_accounts_tenant on compute.provider_accounts (tenant_id, id);

create table compute.provider_bootstraps (
  id text primary key,
  tenant_id text not null,
  account_id text not null references compute.provider_accounts (id) on delete cascade,
  pool_id text not null references compute.pools (id),
  state text not null check (state in ('running', 'succeeded', 'failed')),
  hosts text not null,
  created_by text,
  created_at timestamptz not null,
  finished_at timestamptz
);
create index provider_bootstraps_account on compute.provider_bootstraps (account_id, id);
`,
  },
];
