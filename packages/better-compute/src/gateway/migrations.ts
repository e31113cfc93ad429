/**
 * The gateway replicas alive now: each records its id and the address other replicas and daemons
 * reach it at, and stamps it while it runs. `compute.node_sessions.gateway_id` names the replica
 * holding a node; this table says where that replica is.
 */
import type { ModuleMigrations } from '@better-compute/db';

export const gatewayMigrations: ModuleMigrations = {
  module: 'gateway',
  migrations: [
    {
      name: '0001_gateway_replicas',
      sql: `
create table compute.gateway_replicas (
  id text primary key,
  url text not null,
  started_at timestamptz not null,
  last_seen_at timestamptz not null
);
`,
    },
  ],
};
