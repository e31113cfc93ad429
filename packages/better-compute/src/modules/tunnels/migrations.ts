/**
 * Tunnels as tickets: each `tunnels.open` writes one row, and the first WebSocket that presents its
 * ticket spends it with one conditional update, so a replayed ticket is refused on every replica.
 * Never edit a migration once it has landed; add one.
 */
import type { Migration } from '@better-compute/db';

export const tunnelsMigrations: readonly Migration[] = [
  {
    name: '0001_tunnels',
    sql: `
create table compute.tunnels (
  id text primary key,
  tenant_id text not null,
  principal text not null,
  credential_id text not null,
  node_id text not null,
  instance_id text,
  op text not null check (op in ('console', 'exec', 'tcp')),
  port integer,
  action text not null,
  issued_at timestamptz not null,
  expires_at timestamptz not null,
  spent_at timestamptz,
  ended_at timestamptz,
  exit_status integer,
  end_reason text
);
create index tunnels_tenant on compute.tunnels (tenant_id, id desc);
create index tunnels_unspent on compute.tunnels (expires_at) where spent_at is null;
`,
  },
  {
    name: '0002_tunnel_sandboxes',
    sql: `
alter table compute.tunnels add column sandbox_id text;
`,
  },
];
