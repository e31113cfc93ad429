/**
 * Images (`img_…`), flavors (`flv_…`), instances (`inst_…`) and the instance quotas of a tenant on
 * a pool. An instance holds its place on its node by its row: every instance not deleted counts
 * against its node's vCPUs and memory. Never edit a migration once it has landed; add one.
 */
import type { Migration } from '@better-compute/db';

export const vpsMigrations: readonly Migration[] = [
  {
    name: '0001_vps',
    sql: `
create table compute.images (
  id text primary key,
  tenant_id text not null,
  name text not null,
  channel text not null check (channel in ('testing', 'stable', 'deprecated')),
  disk_format text not null check (disk_format in ('qcow2', 'raw')),
  source text not null,
  sha256 text not null,
  size_bytes bigint not null check (size_bytes > 0),
  architecture text not null check (architecture in ('x86_64', 'aarch64')),
  os text not null,
  boot jsonb,
  version integer not null default 1,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  unique (tenant_id, name)
);

create table compute.flavors (
  id text primary key,
  tenant_id text not null,
  pool_id text not null references compute.pools (id),
  name text not null,
  vcpus integer not null check (vcpus > 0),
  memory_mib integer not null check (memory_mib > 0),
  disk_gib integer not null check (disk_gib > 0),
  gpus integer not null default 0 check (gpus >= 0),
  gpu_model text,
  description text not null default '',
  version integer not null default 1,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  deleted_at timestamptz
);
create unique index flavors_live_name on compute.flavors (pool_id, name) where deleted_at is null;

create table compute.instances (
  id text primary key,
  tenant_id text not null,
  pool_id text not null,
  node_id text not null,
  flavor_id text not null references compute.flavors (id),
  image_id text not null references compute.images (id),
  name text not null,
  state text not null check (state in ('provisioning', 'running', 'stopping', 'stopped', 'deleting', 'deleted', 'failed')),
  reason text,
  vcpus integer not null,
  memory_mib integer not null,
  disk_gib integer not null,
  gpus integer not null default 0,
  reservation_id text,
  workflow_id text,
  ssh_keys jsonb not null default '[]'::jsonb,
  user_data text,
  address text,
  ssh_port integer,
  version integer not null default 1,
  owner_id text,
  agent_id text,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  deleted_at timestamptz
);
create unique index instances_live_name on compute.instances (tenant_id, name) where state <> 'deleted';
create index instances_node on compute.instances (node_id) where state <> 'deleted';
create index instances_tenant on compute.instances (tenant_id, id desc);
create index instances_flavor on compute.instances (flavor_id) where state <> 'deleted';

create table compute.instance_quotas (
  tenant_id text not null,
  pool_id text not null,
  resource text not null check (resource in ('instances', 'vcpus', 'memoryMiB')),
  limit_value integer,
  updated_at timestamptz not null,
  primary key (tenant_id, pool_id, resource)
);
`,
  },
  {
    name: '0002_flavor_image_channels',
    sql: `
-- The image a flavor's instances boot when their create names none: the newest image of this OS on
-- this channel, found at each create (so a promotion moves the flavor on). Both or neither.
alter table compute.flavors
  add column image_os text,
  add column image_channel text check (image_channel in ('testing', 'stable', 'deprecated')),
  add constraint flavors_image_both check ((image_os is null) = (image_channel is null));
`,
  },
  {
    // Whether the guest may open connections beyond its node (NAT through the node's uplinks):
    // chosen at create, sent with every start. Instances made before it had egress.
    name: '0003_instance_egress',
    sql: `alter table compute.instances add column egress boolean not null default true;`,
  },
];
