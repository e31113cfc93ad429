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
  {
    // A release's builds, stored piece by piece (releases.upload) and served to nodes through their
    // gateway session; `complete` once every byte is there and the SHA-256 matched the manifest.
    name: '0002_release_artifacts',
    sql: `
create table compute.release_artifacts (
  release_id text not null references compute.releases (id),
  platform text not null,
  size bigint not null,
  sha256 text not null check (sha256 ~ '^[0-9a-f]{64}$'),
  stored bigint not null default 0,
  complete boolean not null default false,
  primary key (release_id, platform)
);
create table compute.release_artifact_chunks (
  release_id text not null,
  platform text not null,
  "offset" bigint not null,
  data bytea not null,
  primary key (release_id, platform, "offset"),
  foreign key (release_id, platform) references compute.release_artifacts (release_id, platform)
);
`,
  },
  {
    // The release keys' own changes (releases.rotatePins): one row per epoch, each statement signed
    // by a threshold of the keys of the epoch before (epoch 0 is the configuration's release.pins).
    name: '0003_release_pin_statements',
    sql: `
create table compute.release_pin_statements (
  epoch integer primary key check (epoch >= 1),
  statement jsonb not null,
  signatures jsonb not null,
  signers jsonb not null,
  registered_at timestamptz not null,
  registered_by text not null
);
`,
  },
];
