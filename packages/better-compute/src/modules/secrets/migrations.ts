/**
 * Secrets (`sec_…`): a tenant's write-only values, one row each, the current version's value sealed
 * under the deployment secret with the row's id and version as associated data (sealing.ts). A put
 * replaces the sealed value and adds one to the version; the previous value is not kept. Never edit
 * a migration once it has landed; add one.
 */
import type { Migration } from '@better-compute/db';

export const secretsMigrations: readonly Migration[] = [
  {
    name: '0001_secrets',
    sql: `
create table compute.secrets (
  id text primary key,
  tenant_id text not null,
  name text not null,
  version integer not null check (version >= 1),
  sealed text not null check (sealed like 'v1.%'),
  size_bytes integer not null check (size_bytes between 1 and 32768),
  created_by text,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  unique (tenant_id, name)
);
create index secrets_tenant on compute.secrets (tenant_id, id);
`,
  },
];
