/** Kysely's view of the VPS module's tables (see migrations.ts). */
import type { ColumnType, Generated, Kysely, Selectable } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { FleetDb, FleetTables } from '../fleet/tables.js';

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
type Json<T> = ColumnType<T, string, string>;

interface StoredImageFile {
  source: string;
  sha256: string;
  sizeBytes: number;
}

export interface StoredBoot {
  kernel: StoredImageFile;
  initrd: StoredImageFile | null;
  cmdline: string;
}

export type ImageChannel = 'testing' | 'stable' | 'deprecated';

interface ImagesTable {
  id: string;
  tenant_id: string;
  name: string;
  channel: ImageChannel;
  disk_format: 'qcow2' | 'raw';
  source: string;
  sha256: string;
  size_bytes: ColumnType<string, number | string, number | string>;
  architecture: 'x86_64' | 'aarch64';
  os: string;
  boot: ColumnType<StoredBoot | null, string | null, string | null>;
  version: Generated<number>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

interface FlavorsTable {
  id: string;
  tenant_id: string;
  pool_id: string;
  name: string;
  vcpus: number;
  memory_mib: number;
  disk_gib: number;
  gpus: number;
  gpu_model: string | null;
  description: string;
  /** The OS and channel whose newest image an instance boots when its create names none. */
  image_os: ColumnType<string | null, string | null | undefined, string | null>;
  image_channel: ColumnType<ImageChannel | null, ImageChannel | null | undefined, ImageChannel | null>;
  version: Generated<number>;
  created_at: Timestamp;
  updated_at: Timestamp;
  /** Deleted flavors stay for the deleted instances that name them. */
  deleted_at: NullableTimestamp;
}

export type InstanceState =
  'provisioning' | 'running' | 'stopping' | 'stopped' | 'deleting' | 'deleted' | 'failed';

interface InstancesTable {
  id: string;
  tenant_id: string;
  pool_id: string;
  node_id: string;
  flavor_id: string;
  image_id: string;
  name: string;
  state: InstanceState;
  reason: string | null;
  vcpus: number;
  memory_mib: number;
  disk_gib: number;
  gpus: number;
  reservation_id: string | null;
  workflow_id: string | null;
  ssh_keys: Json<string[]>;
  user_data: string | null;
  address: string | null;
  ssh_port: number | null;
  egress: Generated<boolean>;
  version: Generated<number>;
  owner_id: string | null;
  agent_id: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  deleted_at: NullableTimestamp;
}

interface InstanceQuotasTable {
  tenant_id: string;
  pool_id: string;
  resource: 'instances' | 'vcpus' | 'memoryMiB';
  limit_value: number | null;
  updated_at: Timestamp;
}

export interface VpsTables extends FleetTables {
  'compute.images': ImagesTable;
  'compute.flavors': FlavorsTable;
  'compute.instances': InstancesTable;
  'compute.instance_quotas': InstanceQuotasTable;
}

export type VpsDb = Kysely<VpsTables>;
export const vpsDb = (db: Kysely<ComputeTables>): VpsDb => db as unknown as VpsDb;
export type ImageRow = Selectable<ImagesTable>;
export type FlavorRow = Selectable<FlavorsTable>;
export type InstanceRow = Selectable<InstancesTable>;
/** The same handle as the fleet's functions take it. */
export const asFleet = (db: VpsDb): FleetDb => db as unknown as FleetDb;
