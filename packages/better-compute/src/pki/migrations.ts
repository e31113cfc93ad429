/**
 * The pins a deployment first served with: the command root's and the audit key's, recorded by
 * `serve` so `doctor` notices a bundle that was swapped for another one.
 */
import type { ModuleMigrations } from '@better-compute/db';

export const pkiMigrations: ModuleMigrations = {
  module: 'pki',
  migrations: [
    {
      name: '0001_pki_pins',
      sql: `
create table compute.pki_pins (
  purpose text primary key,
  pin text not null,
  recorded_at timestamptz not null default now()
);
`,
    },
  ],
};
