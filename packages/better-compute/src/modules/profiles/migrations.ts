/**
 * Provision profiles (`prof_…`): a tenant's documents saying what a bare-metal machine becomes
 * when it is deployed (docs/profiles.md). The document is kept as the JSON text the method's
 * schema gave (its fields in the schema's order), with the SHA-256 of its canonical form; the pool
 * and image columns are copies of what it names, for lists. An update replaces the document and adds
 * one to the version. Never edit a migration once it has landed; add one.
 */
import type { Migration } from '@better-compute/db';

export const profilesMigrations: readonly Migration[] = [
  {
    name: '0001_profiles',
    sql: `
create table compute.profiles (
  id text primary key,
  tenant_id text not null,
  name text not null,
  version integer not null check (version >= 1),
  pool_id text not null references compute.pools (id),
  image text not null,
  document text not null,
  document_sha256 text not null check (document_sha256 ~ '^[0-9a-f]{64}$'),
  created_by text,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  unique (tenant_id, name)
);
create index profiles_tenant on compute.profiles (tenant_id, id);
`,
  },
];
