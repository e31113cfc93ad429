/**
 * Sandbox templates (`sbxt_…`), sandboxes (`sbx_…`), their snapshots (`snap_…`) and volumes
 * (`vol_…`). A sandbox not deleted holds its flavor's vCPUs and memory on its node, as an instance
 * does. The controller job is seeded here and queues its own next pass. Never edit a migration
 * once it has landed; add one.
 */
import type { Migration } from '@better-compute/db';

export const sandboxesMigrations: readonly Migration[] = [
  {
    name: '0001_sandboxes',
    sql: `
create table compute.sandbox_templates (
  id text primary key,
  tenant_id text not null,
  name text not null,
  pool_id text not null,
  flavor_id text not null,
  image_id text not null,
  runtime text not null check (runtime in ('bwrap', 'qemu')),
  user_data text,
  default_ttl_seconds integer not null,
  max_ttl_seconds integer not null,
  warm_min integer not null,
  warm_max integer not null,
  env jsonb not null default '[]'::jsonb,
  network text not null check (network in ('egress', 'private', 'none')),
  volumes jsonb not null default '[]'::jsonb,
  version integer not null default 1,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  deleted_at timestamptz,
  check (default_ttl_seconds <= max_ttl_seconds),
  check (warm_min between 0 and 64 and warm_max between warm_min and 64)
);
create unique index sandbox_templates_live_name on compute.sandbox_templates (tenant_id, name) where deleted_at is null;

create table compute.sandbox_volumes (
  id text primary key,
  tenant_id text not null,
  pool_id text not null,
  node_id text,
  name text not null,
  size_gib integer not null check (size_gib between 1 and 16384),
  state text not null check (state in ('creating', 'ready', 'resizing', 'deleting', 'deleted', 'failed')),
  reason text,
  owner_id text,
  workflow_id text,
  version integer not null default 1,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  deleted_at timestamptz
);
create unique index sandbox_volumes_live_name on compute.sandbox_volumes (tenant_id, name) where state <> 'deleted';

create table compute.sandboxes (
  id text primary key,
  tenant_id text not null,
  template_id text not null references compute.sandbox_templates (id),
  template_version integer not null,
  image_id text not null,
  pool_id text not null,
  node_id text,
  runtime text not null,
  state text not null check (state in ('starting', 'warm', 'running', 'deleting', 'deleted', 'failed')),
  reason text,
  warm boolean not null default false,
  for_pool boolean not null default false,
  from_snapshot_id text,
  identity_rebound boolean not null default true,
  host_public_key text,
  host_certificate_expires_at timestamptz,
  vcpus integer not null,
  memory_mib integer not null,
  ttl_seconds integer not null,
  max_ttl_seconds integer not null,
  expires_at timestamptz,
  workflow_id text,
  owner_id text,
  agent_id text,
  version integer not null default 1,
  created_at timestamptz not null,
  ready_at timestamptz,
  claimed_at timestamptz,
  updated_at timestamptz not null,
  deleted_at timestamptz
);
create index sandboxes_tenant on compute.sandboxes (tenant_id, id desc);
create index sandboxes_node on compute.sandboxes (node_id) where state <> 'deleted';
create index sandboxes_warm on compute.sandboxes (template_id, template_version) where state = 'warm';
create index sandboxes_expiry on compute.sandboxes (expires_at) where state in ('starting', 'running');

create table compute.sandbox_snapshots (
  id text primary key,
  tenant_id text not null,
  sandbox_id text not null references compute.sandboxes (id),
  template_id text not null,
  node_id text not null,
  state text not null check (state in ('creating', 'ready', 'deleting', 'deleted', 'failed')),
  memory boolean not null,
  keep boolean not null,
  size_bytes bigint,
  reason text,
  owner_id text,
  workflow_id text,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  deleted_at timestamptz
);
create index sandbox_snapshots_tenant on compute.sandbox_snapshots (tenant_id, id desc);
create index sandbox_snapshots_sandbox on compute.sandbox_snapshots (sandbox_id);

create table compute.sandbox_quotas (
  tenant_id text not null,
  pool_id text not null,
  resource text not null check (resource in ('sandboxes', 'vcpus', 'memoryMiB')),
  limit_value integer,
  updated_at timestamptz not null,
  primary key (tenant_id, pool_id, resource)
);

insert into compute.jobs (id, kind, payload, run_at) values ('job_sandboxes_controller_first', 'sandboxes.controller', '{}'::jsonb, '-infinity');
`,
  },
];
