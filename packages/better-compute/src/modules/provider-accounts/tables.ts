/** Kysely's view of the provider accounts module's tables. */
import type { ColumnType, Kysely, Selectable } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

interface ProviderAccountsTable {
  id: string;
  tenant_id: string;
  name: string;
  driver: string;
  version: number;
  /** The document as JSON text; credentials in it are secret references. */
  config: string;
  created_by: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

interface ProviderBootstrapsTable {
  id: string;
  tenant_id: string;
  account_id: string;
  pool_id: string;
  state: 'running' | 'succeeded' | 'failed';
  /** JSON text: BootstrapHost[]. */
  hosts: string;
  created_by: string | null;
  created_at: Timestamp;
  finished_at: Timestamp | null;
}

export interface BootstrapHost {
  host: string;
  state: 'pending' | 'running' | 'joined' | 'already-node' | 'failed';
  nodeId: string | null;
  error: string | null;
}

interface ProviderAccountTables extends ComputeTables {
  'compute.provider_accounts': ProviderAccountsTable;
  'compute.provider_bootstraps': ProviderBootstrapsTable;
}

export type ProviderAccountsDb = Kysely<ProviderAccountTables>;
export const providerAccountsDb = (db: Kysely<ComputeTables>): ProviderAccountsDb =>
  db as unknown as ProviderAccountsDb;
export type ProviderAccountRow = Selectable<ProviderAccountsTable>;
export type ProviderBootstrapRow = Selectable<ProviderBootstrapsTable>;
