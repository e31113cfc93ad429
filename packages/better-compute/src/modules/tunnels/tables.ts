/** Kysely's view of the tunnels table. */
import type { ColumnType, Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

interface TunnelsTable {
  id: string;
  tenant_id: string;
  principal: string;
  credential_id: string;
  node_id: string;
  instance_id: string | null;
  /** The sandbox of a `sandbox exec` tunnel (migration 0002). */
  sandbox_id: ColumnType<string | null, string | null | undefined, string | null>;
  op: 'console' | 'exec' | 'tcp';
  port: number | null;
  action: string;
  issued_at: Timestamp;
  expires_at: Timestamp;
  spent_at: NullableTimestamp;
  ended_at: NullableTimestamp;
  exit_status: number | null;
  end_reason: string | null;
}

export interface TunnelTables extends ComputeTables {
  'compute.tunnels': TunnelsTable;
}

export const tunnelsDb = (db: Kysely<ComputeTables>) => db as unknown as Kysely<TunnelTables>;
