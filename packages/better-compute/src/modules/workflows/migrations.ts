/**
 * Workflows (`wf_…`): a node-level operation's steps, kept as one JSON array on the row (a step is
 * small and always read with its workflow); the controller advances `current_step` under the
 * row's lock. Never edit a migration once it has landed; add one.
 */
import type { Migration } from '@better-compute/db';

export const workflowsMigrations: readonly Migration[] = [
  {
    name: '0001_workflows',
    sql: `
create table compute.workflows (
  id text primary key,
  tenant_id text not null,
  node_id text not null,
  kind text not null,
  state text not null check (state in ('running', 'paused', 'failed', 'succeeded', 'aborted')),
  current_step integer not null default 0,
  steps jsonb not null,
  input jsonb not null default '{}'::jsonb,
  reason text,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  finished_at timestamptz
);
create index workflows_node on compute.workflows (tenant_id, node_id, created_at desc, id desc);
`,
  },
  {
    name: '0002_workflow_instances',
    sql: `
alter table compute.workflows add column instance_id text;
create index workflows_instance on compute.workflows (instance_id, created_at desc) where instance_id is not null;
`,
  },
  {
    // The metrics' count of unfinished workflows reads this instead of the whole history.
    name: '0003_workflows_open',
    sql: `
create index workflows_open on compute.workflows (state) where state in ('running', 'paused');
`,
  },
];
