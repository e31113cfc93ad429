/**
 * Rollouts (`rollout_…`): one row per rollout of a bcd release, its waves and their nodes kept as
 * one JSON array on the row (read and changed whole, under the row's lock, by the methods and the
 * controller job). Rollouts are the platform's: no tenant column. Never edit a migration once it
 * has landed; add one.
 */
import type { Migration } from '@better-compute/db';

export const rolloutsMigrations: readonly Migration[] = [
  {
    name: '0001_rollouts',
    sql: `
create table compute.rollouts (
  id text primary key,
  seq bigserial not null unique,
  release_id text not null,
  version text not null,
  state text not null check (state in ('running', 'paused', 'aborted', 'completed')),
  target jsonb not null,
  waves jsonb not null,
  current_wave integer not null default 0,
  failure_budget integer not null check (failure_budget >= 0),
  health_timeout_seconds integer not null check (health_timeout_seconds between 10 and 86400),
  reason text,
  created_by text not null,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  finished_at timestamptz
);
create index rollouts_open on compute.rollouts (state) where state in ('running', 'paused');
`,
  },
];
