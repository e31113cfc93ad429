/**
 * Bare-metal machines (docs/metal.md). A machine's id is a node id: the node it becomes once
 * deployed keeps it. Its BMC password is kept sealed (`v1.…`, bound to the tenant and machine) and
 * opened only by the gateway into the signed command for the site's agent. The provision state is
 * checked against core's METAL_STATES here too, so no write outside the module's rule stores a
 * state the table does not know. Never edit a migration once it has landed; add one.
 */
import type { Migration } from '@better-compute/db';
import { METAL_STATES } from '@better-compute/core';

const states = METAL_STATES.map((s) => `'${s}'`).join(', ');

export const metalMigrations: readonly Migration[] = [
  {
    name: '0001_metal_machines',
    sql: `
create table compute.metal_machines (
  id text primary key,
  tenant_id text not null,
  site_id text not null references compute.sites (id),
  name text not null,
  provision_state text not null check (provision_state in (${states})),
  target_state text check (target_state in (${states})),
  power_state text not null default 'unknown' check (power_state in ('on', 'off', 'unknown')),
  bmc_driver text not null check (bmc_driver in ('ipmi', 'redfish')),
  bmc_address text not null,
  bmc_port integer,
  bmc_user text not null,
  bmc_password_sealed text not null check (bmc_password_sealed like 'v1.%'),
  product_uuid text not null,
  macs text[] not null default '{}',
  workflow_id text,
  last_error text,
  version integer not null default 1,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  state_changed_at timestamptz not null,
  unique (tenant_id, name),
  unique (tenant_id, product_uuid)
);
create index metal_machines_tenant on compute.metal_machines (tenant_id, id);
`,
  },
  {
    name: '0002_redfish_fingerprint',
    sql: `
-- A Redfish BMC is reached over HTTPS with its certificate pinned: the SHA-256 fingerprint given at
-- enrolment, colon-separated upper-case hex; null for IPMI, which has no certificate.
alter table compute.metal_machines
  add column bmc_tls_fingerprint text check (bmc_tls_fingerprint ~ '^([0-9A-F]{2}:){31}[0-9A-F]{2}$');
`,
  },
  {
    name: '0003_pxe_discoveries',
    sql: `
-- PXE discovery: what a site's agent saw PXE-booting from a MAC with no boot entry, one row per
-- site and MAC, kept 24 hours (older rows are removed as new reports arrive and never read).
-- Unauthenticated DHCP data: nothing here binds a MAC; metal.confirmMac is a person's decision.
create table compute.metal_pxe_discoveries (
  site_id text not null references compute.sites (id),
  tenant_id text not null,
  mac text not null check (mac ~ '^([0-9a-f]{2}:){5}[0-9a-f]{2}$'),
  uuid text check (uuid ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
  agent_node_id text not null,
  first_seen_at timestamptz not null,
  last_seen_at timestamptz not null,
  times_seen integer not null default 1,
  primary key (site_id, mac)
);
create index metal_pxe_discoveries_seen on compute.metal_pxe_discoveries (site_id, last_seen_at);
`,
  },
  {
    name: '0004_inventory',
    sql: `
-- What the deploy ramdisk reported the last time the machine was inspected (metal inspect), checked
-- against core's metalInventorySchema by the gateway before it is stored, and when.
alter table compute.metal_machines
  add column inventory jsonb,
  add column inspected_at timestamptz;
`,
  },
  {
    name: '0005_cleaning',
    sql: `
-- What the deploy ramdisk reported the last time it cleaned the machine (provide): the disks and the
-- bytes of metadata it erased on each, or why it stopped; checked by the gateway before it is stored.
alter table compute.metal_machines
  add column cleaning jsonb,
  add column cleaned_at timestamptz;
`,
  },
];
