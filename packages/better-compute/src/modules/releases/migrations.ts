/**
 * Signed bcd releases (`rel_…`): one row per version, holding the manifest as its canonical JSON
 * (the exact bytes the keys signed, after the signing context), the envelope's signatures, and the
 * pinned keys that verified when it was registered. Releases are the platform's: no tenant column.
 * Never edit a migration once it has landed; add one.
 */
import type { Migration } from '@better-compute/db';

export const releasesMigrations: readonly Migration[] = [
  {
    name: '0001_releases',
    sql: `
create table compute.releases (
  id text primary key,
  seq bigserial not null unique,
  version text not null unique,
  minimum_version text not null,
  digest text not null check (digest ~ '^[0-9a-f]{64}$'),
  manifest text not null,
  signatures jsonb not null,
  signers jsonb not null,
  registered_at timestamptz not null,
  registered_by text not null
);
`,
  },
];
