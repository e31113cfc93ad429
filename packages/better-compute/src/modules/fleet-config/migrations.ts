/**
 * Fleet configuration's tables (docs/fleet.md): each apply with the fleet as it left it, and the
 * fleet.drift job's last verdict per tenant. Never edit a migration once it has landed; add one.
 */
import type { Migration } from '@better-compute/db';

export const fleetConfigMigrations: readonly Migration[] = [
  {
    name: '0001_fleet_applies',
    sql: `
-- One row per apply: the plan it carried out, and the fleet as the apply left it (the document
-- fleet.export answers), which the fleet.drift job compares the live fleet with.
create table compute.fleet_applies (
  id text primary key,
  seq bigserial not null unique,
  tenant_id text not null,
  plan_hash text not null check (plan_hash ~ '^[0-9a-f]{64}$'),
  prune boolean not null,
  document jsonb not null,
  counts jsonb not null,
  calls integer not null,
  actor text,
  request_id text not null,
  applied_at timestamptz not null
);
create index fleet_applies_tenant on compute.fleet_applies (tenant_id, seq desc);

-- What the fleet.drift job last saw for a tenant, against its latest apply.
create table compute.fleet_drift (
  tenant_id text primary key,
  apply_id text not null references compute.fleet_applies (id),
  state text not null check (state in ('converged', 'drifted')),
  changes jsonb not null,
  checked_at timestamptz not null,
  since timestamptz
);

-- The first run of the drift job; each run queues the next.
insert into compute.jobs (id, kind, payload, run_at)
  values ('job_fleet_drift_first', 'fleet.drift', '{}'::jsonb, '-infinity');
`,
  },
];
