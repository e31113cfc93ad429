/** Kysely's view of the metal module's table. */
import type { MetalState } from '@better-compute/core';
import type { MetalCleaning, MetalInventory } from '@better-compute/core/methods';
import type { ColumnType, Kysely, Selectable } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

interface MetalMachinesTable {
  id: string;
  tenant_id: string;
  site_id: string;
  name: string;
  provision_state: MetalState;
  target_state: MetalState | null;
  power_state: 'on' | 'off' | 'unknown';
  bmc_driver: 'ipmi' | 'redfish';
  bmc_address: string;
  bmc_port: number | null;
  bmc_user: string;
  /** A Redfish BMC's pinned certificate fingerprint, `AB:CD:…`; null for IPMI. */
  bmc_tls_fingerprint: string | null;
  bmc_password_sealed: string;
  product_uuid: string;
  macs: ColumnType<string[], string[], string[]>;
  workflow_id: string | null;
  last_error: string | null;
  inventory: ColumnType<MetalInventory | null, string | null | undefined, string | null>;
  inspected_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  cleaning: ColumnType<MetalCleaning | null, string | null | undefined, string | null>;
  cleaned_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  version: number;
  created_at: Timestamp;
  updated_at: Timestamp;
  state_changed_at: Timestamp;
}

/** A MAC a site's agent saw PXE-booting without a boot entry (migration 0003). */
interface MetalPxeDiscoveriesTable {
  site_id: string;
  tenant_id: string;
  mac: string;
  /** The machine's SMBIOS UUID from DHCP option 97, lower case; null when it sent none. */
  uuid: string | null;
  agent_node_id: string;
  first_seen_at: Timestamp;
  last_seen_at: Timestamp;
  times_seen: number;
}

interface MetalTables extends ComputeTables {
  'compute.metal_machines': MetalMachinesTable;
  'compute.metal_pxe_discoveries': MetalPxeDiscoveriesTable;
}

export type MetalDb = Kysely<MetalTables>;
export const metalDb = (db: Kysely<ComputeTables>): MetalDb => db as unknown as MetalDb;
export type MachineRow = Selectable<MetalMachinesTable>;
