/** Kysely's view of fleet configuration's tables. */
import type { FleetChange, FleetConfig } from '@better-compute/core/methods';
import type { ColumnType, Generated, Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
type Json<T> = ColumnType<T, string, string>;

interface FleetCounts {
  create: number;
  update: number;
  delete: number;
}

interface FleetAppliesTable {
  id: string;
  seq: Generated<string>;
  tenant_id: string;
  plan_hash: string;
  prune: boolean;
  /** The fleet as the apply left it: fleet.export's document. */
  document: Json<FleetConfig>;
  counts: Json<FleetCounts>;
  calls: number;
  actor: string | null;
  request_id: string;
  applied_at: Timestamp;
}

interface FleetDriftTable {
  tenant_id: string;
  apply_id: string;
  state: 'converged' | 'drifted';
  changes: Json<FleetChange[]>;
  checked_at: Timestamp;
  since: NullableTimestamp;
}

interface FleetConfigTables extends ComputeTables {
  'compute.fleet_applies': FleetAppliesTable;
  'compute.fleet_drift': FleetDriftTable;
}

export type FleetConfigDb = Kysely<FleetConfigTables>;
export const fleetConfigDb = (db: Kysely<ComputeTables>): FleetConfigDb => db as unknown as FleetConfigDb;
