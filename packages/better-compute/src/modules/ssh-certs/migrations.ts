/**
 * Break-glass SSH certificates as issued: who holds access to which node, until when, and whether
 * it was revoked. Never edit a migration once it has landed; add one.
 */
import type { Migration } from '@better-compute/db';

export const sshCertsMigrations: readonly Migration[] = [
  {
    name: '0001_ssh_certs',
    sql: `
create table compute.ssh_certs (
  id text primary key,
  tenant_id text not null,
  node_id text not null,
  holder text not null,
  holder_name text,
  account text not null,
  principal text not null,
  key_id text not null,
  serial text not null unique,
  fingerprint text not null,
  issued_at timestamptz not null,
  valid_after timestamptz not null,
  valid_before timestamptz not null,
  revoked_at timestamptz,
  revoked_by text,
  revocation_reason text
);
create index ssh_certs_node on compute.ssh_certs (tenant_id, node_id, id desc);
create index ssh_certs_revoked on compute.ssh_certs (node_id, valid_before) where revoked_at is not null;
`,
  },
];
