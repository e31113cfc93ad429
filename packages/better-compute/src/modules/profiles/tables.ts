/** Kysely's view of the profiles module's table. */
import type { ColumnType, Kysely, Selectable } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

interface ProfilesTable {
  id: string;
  tenant_id: string;
  name: string;
  version: number;
  /** The pool the document's node joins (a copy of document.node.poolId). */
  pool_id: string;
  /** What the document's image names: its id, or `name@sha256:…`. */
  image: string;
  /** The document as JSON text. */
  document: string;
  document_sha256: string;
  created_by: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

interface ProfileTables extends ComputeTables {
  'compute.profiles': ProfilesTable;
}

export type ProfilesDb = Kysely<ProfileTables>;
export const profilesDb = (db: Kysely<ComputeTables>): ProfilesDb => db as unknown as ProfilesDb;
export type ProfileRow = Selectable<ProfilesTable>;
