/** Kysely's view of the secrets module's table. */
import type { ColumnType, Kysely, Selectable } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

interface SecretsTable {
  id: string;
  tenant_id: string;
  name: string;
  version: number;
  /** The value, sealed (`v1.…`); never read by anything but resolve.ts. */
  sealed: string;
  /** The value's length in UTF-8 bytes, so a sandbox's environment is measured without opening it. */
  size_bytes: number;
  created_by: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

interface SecretTables extends ComputeTables {
  'compute.secrets': SecretsTable;
}

export type SecretsDb = Kysely<SecretTables>;
export const secretsDb = (db: Kysely<ComputeTables>): SecretsDb => db as unknown as SecretsDb;
export type SecretRow = Selectable<SecretsTable>;
