/** Kysely's view of the break-glass SSH tables. */
import type { ColumnType, Kysely, Selectable } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

interface SshCertsTable {
  id: string;
  tenant_id: string;
  node_id: string;
  holder: string;
  holder_name: string | null;
  account: string;
  principal: string;
  key_id: string;
  serial: string;
  fingerprint: string;
  issued_at: Timestamp;
  valid_after: Timestamp;
  valid_before: Timestamp;
  revoked_at: NullableTimestamp;
  revoked_by: string | null;
  revocation_reason: string | null;
}

export interface SshCertTables extends ComputeTables {
  'compute.ssh_certs': SshCertsTable;
}

export type SshCertRow = Selectable<SshCertsTable>;
export const sshCertsDb = (db: Kysely<ComputeTables>) => db as unknown as Kysely<SshCertTables>;
