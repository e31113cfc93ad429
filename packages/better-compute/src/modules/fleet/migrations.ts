/**
 * The fleet's tables: sites, projects, pools and their offers, quotas, join tokens and requests,
 * nodes with their GPUs (grouped by node, product and NVLink domain, with free counts kept in the
 * same transaction as every binding, so placement and capacity read counters instead of scanning
 * GPUs), inventory history, reservations and GPU bindings.
 *
 * No GPU is ever bound twice: since 0003, each GPU group row holds one slot per GPU naming the
 * reservation that holds it (`holders`, parallel to `gpu_indices`), a slot is claimed only while
 * empty under the row's lock, and a check keeps the group's free count equal to its empty slots.
 * Never edit a migration once it has landed; add one.
 */
import type { Migration } from '@better-compute/db';

export const fleetMigrations: readonly Migration[] = [
  {
    name: '0001_fleet',
    sql: `
create table compute.sites (
  id text primary key,
  tenant_id text not null,
  name text not null,
  region text,
  description text not null default '',
  labels jsonb not null default '{}'::jsonb,
  version integer not null default 1,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  unique (tenant_id, name)
);

create table compute.projects (
  id text primary key,
  tenant_id text not null,
  name text not null,
  description text not null default '',
  state text not null default 'active' check (state in ('active', 'archived')),
  version integer not null default 1,
  created_at timestamptz not null,
  archived_at timestamptz,
  unique (tenant_id, name)
);

create table compute.pools (
  id text primary key,
  tenant_id text not null,
  site_id text not null references compute.sites (id),
  name text not null,
  class text not null check (class in ('gpu', 'vps', 'metal')),
  driver text not null,
  state text not null default 'active' check (state in ('active', 'archived')),
  description text not null default '',
  labels jsonb not null default '{}'::jsonb,
  version integer not null default 1,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  unique (tenant_id, name)
);
create index pools_site on compute.pools (site_id);

create table compute.pool_offers (
  pool_id text not null references compute.pools (id),
  tenant_id text not null,
  created_at timestamptz not null,
  primary key (pool_id, tenant_id)
);
create index pool_offers_tenant on compute.pool_offers (tenant_id, pool_id);

create table compute.quotas (
  tenant_id text not null,
  pool_id text not null references compute.pools (id),
  resource text not null check (resource in ('gpus', 'reservations')),
  limit_value bigint not null,
  version integer not null default 1,
  updated_at timestamptz not null,
  primary key (tenant_id, pool_id, resource)
);

create table compute.join_tokens (
  id text primary key,
  tenant_id text not null,
  pool_id text not null references compute.pools (id),
  secret_hash text not null,
  description text not null default '',
  uses_allowed integer not null,
  uses integer not null default 0,
  pre_approved boolean not null default false,
  expires_at timestamptz not null,
  revoked_at timestamptz,
  created_at timestamptz not null
);
create index join_tokens_tenant on compute.join_tokens (tenant_id, id);

create table compute.join_requests (
  id text primary key,
  tenant_id text not null,
  pool_id text not null references compute.pools (id),
  join_token_id text not null references compute.join_tokens (id),
  hostname text not null,
  inventory jsonb not null,
  labels jsonb not null default '{}'::jsonb,
  state text not null default 'pending' check (state in ('pending', 'approved', 'rejected')),
  claim_hash text,
  claimed boolean not null default false,
  node_id text,
  reason text,
  created_at timestamptz not null,
  decided_at timestamptz
);
create index join_requests_tenant on compute.join_requests (tenant_id, state, id);

create table compute.nodes (
  id text primary key,
  -- Join order: placement breaks ties by it, so equal inputs place equally (the simulator's seed).
  seq bigint generated always as identity unique,
  tenant_id text not null,
  pool_id text not null references compute.pools (id),
  name text not null,
  state text not null check (state in ('joining', 'ready', 'cordoned', 'draining', 'drained', 'offline', 'retired')),
  -- Where an offline node goes back to when it heartbeats again.
  state_before_offline text,
  labels jsonb not null default '{}'::jsonb,
  taints jsonb not null default '[]'::jsonb,
  -- Keys of NoSchedule taints, for the placement filter.
  no_schedule text[] not null default '{}',
  cpu_cores integer not null,
  memory_gib integer not null,
  inventory jsonb not null,
  -- The revision placement uses, and the newest reported (they differ while a change waits for the node to be empty).
  inventory_revision integer not null default 1,
  reported_revision integer not null default 1,
  credential_hash text,
  gpu_count integer not null,
  free_gpus integer not null,
  last_heartbeat_at timestamptz,
  state_changed_at timestamptz not null,
  version integer not null default 1,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  check (free_gpus >= 0 and free_gpus <= gpu_count)
);
-- Best fit: the ready node of a pool with the fewest free GPUs that still fit.
create index nodes_fit on compute.nodes (pool_id, state, free_gpus, seq);
create index nodes_tenant on compute.nodes (tenant_id, id);
create index nodes_heartbeat on compute.nodes (last_heartbeat_at) where state not in ('offline', 'retired');

-- GPUs of one node with one product and NVLink domain; free counts for placement and capacity.
create table compute.gpu_groups (
  node_id text not null references compute.nodes (id) on delete cascade,
  group_no integer not null,
  pool_id text not null,
  model text not null,
  product text not null,
  vram_gib integer not null,
  nvlink_domain text,
  total integer not null,
  free integer not null,
  primary key (node_id, group_no),
  check (free >= 0 and free <= total)
);
create index gpu_groups_pool on compute.gpu_groups (pool_id, nvlink_domain);

create table compute.gpus (
  node_id text not null references compute.nodes (id) on delete cascade,
  idx integer not null,
  group_no integer not null,
  pool_id text not null,
  model text not null,
  product text not null,
  vram_gib integer not null,
  nvlink_domain text,
  reservation_id text,
  primary key (node_id, idx)
);
create index gpus_reservation on compute.gpus (reservation_id) where reservation_id is not null;

create table compute.node_inventories (
  node_id text not null,
  revision integer not null,
  inventory jsonb not null,
  recorded_at timestamptz not null,
  primary key (node_id, revision)
);

create table compute.reservations (
  id text primary key,
  -- Queue order; also the deterministic order of the simulator.
  seq bigint generated always as identity unique,
  tenant_id text not null,
  pool_id text not null references compute.pools (id),
  project_id text,
  state text not null check (state in ('queued', 'active', 'ended')),
  gpus integer not null,
  duration_seconds integer not null,
  nvlink boolean not null,
  selector text,
  gpu_model text,
  gpu_product text,
  tolerations text[] not null default '{}',
  created_at timestamptz not null,
  activated_at timestamptz,
  ends_at timestamptz,
  ended_at timestamptz,
  end_reason text check (end_reason in ('released', 'expired', 'cancelled', 'node-retired')),
  version integer not null default 1,
  check ((state = 'ended') = (end_reason is not null))
);
create index reservations_queue on compute.reservations (pool_id, seq) where state = 'queued';
create index reservations_expiry on compute.reservations (ends_at) where state = 'active';
create index reservations_tenant on compute.reservations (tenant_id, id);
create index reservations_holding on compute.reservations (pool_id, tenant_id) where state in ('queued', 'active');

create table compute.gpu_bindings (
  id bigint generated always as identity primary key,
  reservation_id text not null references compute.reservations (id),
  tenant_id text not null,
  pool_id text not null,
  node_id text not null,
  gpu_index integer not null,
  group_no integer not null,
  model text not null,
  product text not null,
  nvlink_domain text,
  bound_at timestamptz not null,
  released_at timestamptz
);
create unique index gpu_bindings_one_active on compute.gpu_bindings (node_id, gpu_index) where released_at is null;
create index gpu_bindings_reservation on compute.gpu_bindings (reservation_id);
create index gpu_bindings_tenant_time on compute.gpu_bindings (tenant_id, bound_at);
create index gpu_bindings_pool_time on compute.gpu_bindings (pool_id, bound_at);

-- The controller's first pass; each pass queues the next (modules/capacity/controller.ts).
insert into compute.jobs (id, kind, payload, run_at) values ('job_fleet_controller_first', 'fleet.controller', '{}'::jsonb, '-infinity');

-- nodes.events reads a node's events from the outbox by subject.
create index events_fleet_subject on compute.events (subject_id, tx_id, tx_index) where subject_type = 'node';
`,
  },
  {
    name: '0002_capacity_reads',
    sql: `
-- capacity reads one narrow table: each GPU group carries its node's state, kept by triggers (set
-- when the group is written, changed with the node's state), so it never joins the wide nodes rows.
alter table compute.gpu_groups add column node_state text;
update compute.gpu_groups g set node_state = n.state from compute.nodes n where n.id = g.node_id;
alter table compute.gpu_groups alter column node_state set not null;

create function compute.gpu_group_node_state() returns trigger language plpgsql as $$
begin
  new.node_state := (select n.state from compute.nodes n where n.id = new.node_id);
  return new;
end
$$;
create trigger gpu_groups_node_state before insert on compute.gpu_groups
  for each row execute function compute.gpu_group_node_state();

create function compute.node_state_to_gpu_groups() returns trigger language plpgsql as $$
begin
  update compute.gpu_groups set node_state = new.state where node_id = new.id;
  return null;
end
$$;
create trigger nodes_state_to_gpu_groups after update of state on compute.nodes
  for each row when (old.state is distinct from new.state) execute function compute.node_state_to_gpu_groups();

-- A release frees its GPUs by their key (node, index), from its bindings; the index by reservation
-- cost every claim and release an index write and served nothing else.
drop index compute.gpus_reservation;

-- Rows that every reserve and release rewrites, on columns no index covers, leave room on their page
-- so the new version stays there (a HOT update: no index entry written). New pages get the room;
-- a database that already holds rows gains it as they move.
alter table compute.gpus set (fillfactor = 70);
alter table compute.gpu_groups set (fillfactor = 70);
`,
  },
  {
    name: '0003_group_holders',
    sql: `
-- Who holds a GPU lives in its group's row: one slot per GPU, parallel to the group's GPU indices,
-- with the holding reservation's id or null. A reserve or release rewrites one group row (in place:
-- no index covers it) instead of one gpus row per GPU, and the free count is checked against the slots.
alter table compute.gpu_groups add column gpu_indices integer[], add column holders text[];
update compute.gpu_groups g
set gpu_indices = x.indices, holders = x.holders
from (
  select node_id, group_no, array_agg(idx order by idx) as indices, array_agg(reservation_id order by idx) as holders
  from compute.gpus group by node_id, group_no) x
where x.node_id = g.node_id and x.group_no = g.group_no;
update compute.gpu_groups set gpu_indices = '{}', holders = '{}' where gpu_indices is null;
alter table compute.gpu_groups
  alter column gpu_indices set not null,
  alter column holders set not null,
  add constraint gpu_groups_free_slots check (
    cardinality(holders) = cardinality(gpu_indices) and cardinality(holders) = total
    and free = coalesce(cardinality(array_positions(holders, null)), 0));
alter table compute.gpus drop column reservation_id;

-- A binding is one row per reservation, node and GPU group, its GPUs' indices in an array: a
-- reservation writes one row per group it uses instead of one per GPU, and its release sets
-- released_at in place (no index names it, so the update is HOT).
alter table compute.gpu_bindings rename to gpu_bindings_by_gpu;
alter index compute.gpu_bindings_pkey rename to gpu_bindings_by_gpu_pkey;
alter sequence compute.gpu_bindings_id_seq rename to gpu_bindings_by_gpu_id_seq;
create table compute.gpu_bindings (
  id bigint generated by default as identity primary key,
  reservation_id text not null references compute.reservations (id),
  tenant_id text not null,
  pool_id text not null,
  node_id text not null,
  group_no integer not null,
  gpu_indices integer[] not null,
  gpu_count integer not null,
  model text not null,
  product text not null,
  nvlink_domain text,
  bound_at timestamptz not null,
  released_at timestamptz,
  check (gpu_count = cardinality(gpu_indices) and gpu_count > 0)
) with (fillfactor = 80);
insert into compute.gpu_bindings (id, reservation_id, tenant_id, pool_id, node_id, group_no, gpu_indices, gpu_count,
  model, product, nvlink_domain, bound_at, released_at)
select min(id), reservation_id, tenant_id, pool_id, node_id, group_no, array_agg(gpu_index order by gpu_index),
  count(*)::int, model, product, nvlink_domain, bound_at, released_at
from compute.gpu_bindings_by_gpu
group by reservation_id, tenant_id, pool_id, node_id, group_no, model, product, nvlink_domain, bound_at, released_at;
select setval(pg_get_serial_sequence('compute.gpu_bindings', 'id'),
  greatest(coalesce((select max(id) from compute.gpu_bindings_by_gpu), 0), 1),
  (select count(*) > 0 from compute.gpu_bindings_by_gpu));
drop table compute.gpu_bindings_by_gpu;
create index gpu_bindings_reservation on compute.gpu_bindings (reservation_id);
create index gpu_bindings_tenant_time on compute.gpu_bindings (tenant_id, bound_at);
create index gpu_bindings_pool_time on compute.gpu_bindings (pool_id, bound_at);
`,
  },
  {
    name: '0004_hot_path_writes',
    sql: `
-- What every reserve and release paid for and what it bought (docs/decisions/reserve-writes.md).
-- seq columns are identities, unique by construction and read through other indexes (best fit,
-- the queue); their unique indexes cost an entry for every new row version.
alter table compute.nodes drop constraint nodes_seq_key;
alter table compute.reservations drop constraint reservations_seq_key;
-- Pools and reservations are archived or ended, never deleted. The foreign keys to them locked the
-- pool's row (FOR KEY SHARE) in every reserve, so concurrent reserves shared that one row through
-- multixacts, and every binding locked its reservation the same way.
-- (By lookup: 0003 created the bindings' key beside the old table's, so its name was chosen for it.)
do $$
declare
  fk record;
begin
  for fk in
    select conrelid::regclass as tab, conname from pg_constraint
    where contype = 'f' and (
      (conrelid = 'compute.reservations'::regclass and confrelid = 'compute.pools'::regclass)
      or (conrelid = 'compute.gpu_bindings'::regclass and confrelid = 'compute.reservations'::regclass))
  loop
    execute format('alter table %s drop constraint %I', fk.tab, fk.conname);
  end loop;
end
$$;
`,
  },
  {
    name: '0005_node_inventory_once',
    sql: `
-- A node's row gets a new version at every reserve, release and heartbeat (free_gpus and
-- last_heartbeat_at are indexed, so none of these updates is HOT), and it carried a copy of the
-- inventory in use, about 1 KiB of JSON for eight GPUs, into every version and the WAL. Nothing read
-- that copy: the inventory in use is node_inventories at inventory_revision, kept there anyway.
alter table compute.nodes drop column inventory;
`,
  },
  {
    name: '0006_quota_versions_survive_clearing',
    sql: `
-- Clearing a quota deleted its row, so the next limit set started again at version 1 and a writer
-- holding an old version could pass --if-version. A cleared quota now keeps its row, with no limit,
-- and its version goes on counting.
alter table compute.quotas alter column limit_value drop not null;
`,
  },
  {
    name: '0007_nodes_waiting_for_inventory',
    sql: `
-- The nodes whose reported inventory waits to be put in use (they take no new work): capacity
-- counts their free GPUs as unavailable, and finds the few of them without reading every node.
create index nodes_inventory_waiting on compute.nodes (pool_id) where reported_revision <> inventory_revision;
`,
  },
  {
    name: '0008_reservation_owners',
    sql: `
-- Who a reservation belongs to: the person (or service account) that created it, and the agent that
-- acted for that person, if one did. Members extend and release their own; ending another's takes
-- an action administrators and operators hold. Older reservations have no owner.
alter table compute.reservations add column owner_id text, add column agent_id text;
create index reservations_owner on compute.reservations (tenant_id, owner_id, id);
`,
  },
  {
    name: '0009_pending_offers',
    sql: `
-- Offers another tenant has not accepted yet (the platform's stand at once, in pool_offers): only an
-- accepted offer puts a pool in a tenant's list.
create table compute.pending_offers (
  pool_id text not null references compute.pools (id),
  tenant_id text not null,
  offered_at timestamptz not null,
  primary key (pool_id, tenant_id)
);
create index pending_offers_tenant on compute.pending_offers (tenant_id, pool_id);
`,
  },
  {
    name: '0010_instance_reservations',
    sql: `
-- The reservation that holds an instance's GPUs (modules/vps) names the instance and has no end: it
-- lasts as long as the instance, ends when the instance is deleted, and is neither released nor
-- extended on its own (its GPUs stay passed through to the guest until then).
alter table compute.reservations add column instance_id text;
`,
  },
  {
    name: '0011_group_slots_last',
    sql: `
-- Every reserve and release rewrites a GPU group's row in place (a HOT update), and the WAL record of
-- such an update logs the new row from its first changed byte to its last: from \`free\` to the changed
-- holder slot. \`node_state\` and \`gpu_indices\` sat between them and went into every record (about 60
-- bytes); \`free\` and \`holders\` now come last, side by side.
alter table compute.gpu_groups drop constraint gpu_groups_free_slots, drop constraint gpu_groups_check;
alter table compute.gpu_groups add column free_now integer, add column holders_now text[];
update compute.gpu_groups set free_now = free, holders_now = holders;
alter table compute.gpu_groups drop column free, drop column holders;
alter table compute.gpu_groups rename column free_now to free;
alter table compute.gpu_groups rename column holders_now to holders;
alter table compute.gpu_groups
  alter column free set not null,
  alter column holders set not null,
  add constraint gpu_groups_free_range check (free >= 0 and free <= total),
  add constraint gpu_groups_free_slots check (
    cardinality(holders) = cardinality(gpu_indices) and cardinality(holders) = total
    and free = coalesce(cardinality(array_positions(holders, null)), 0));
`,
  },
  {
    name: '0012_site_agents',
    sql: `
-- A node joined with a site token (stok_…, kept in join_tokens beside the jtok_ ones) is its site's
-- agent: the bcd that reaches the site's BMCs. It is recorded here so nothing mistakes it for a
-- worker; its system NoSchedule taint keeps placement off it.
alter table compute.nodes add column role text not null default 'worker' check (role in ('worker', 'site-agent'));
create index nodes_site_agents on compute.nodes (pool_id) where role = 'site-agent';
`,
  },
];
