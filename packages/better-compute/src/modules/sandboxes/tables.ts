/** Kysely's view of the sandboxes module's tables (see migrations.ts). */
import type { ColumnType, Generated, Kysely, Selectable } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { VpsTables } from '../vps/tables.js';

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
type Json<T> = ColumnType<T, string, string>;

export type SandboxRuntime = 'bwrap' | 'qemu';
export type SandboxNetwork = 'egress' | 'private' | 'none';
export type SandboxState = 'starting' | 'warm' | 'running' | 'deleting' | 'deleted' | 'failed';
export type SnapshotState = 'creating' | 'ready' | 'deleting' | 'deleted' | 'failed';
export type VolumeState = 'creating' | 'ready' | 'resizing' | 'deleting' | 'deleted' | 'failed';

export interface StoredTemplateVolume {
  volumeId: string;
  path: string;
  readOnly: boolean;
}

export interface SandboxTemplatesTable {
  id: string;
  tenant_id: string;
  name: string;
  pool_id: string;
  flavor_id: string;
  image_id: string;
  runtime: SandboxRuntime;
  user_data: string | null;
  default_ttl_seconds: number;
  max_ttl_seconds: number;
  warm_min: number;
  warm_max: number;
  env: Json<{ name: string; secretRef: string }[]>;
  network: SandboxNetwork;
  volumes: Json<StoredTemplateVolume[]>;
  version: Generated<number>;
  created_at: Timestamp;
  updated_at: Timestamp;
  deleted_at: NullableTimestamp;
}

export interface SandboxesTable {
  id: string;
  tenant_id: string;
  template_id: string;
  template_version: number;
  image_id: string;
  pool_id: string;
  node_id: string | null;
  runtime: SandboxRuntime;
  state: SandboxState;
  reason: string | null;
  warm: boolean;
  /** Started by the warm-pool controller for its template; no owner until claimed. */
  for_pool: boolean;
  from_snapshot_id: string | null;
  identity_rebound: boolean;
  host_public_key: string | null;
  host_certificate_expires_at: NullableTimestamp;
  vcpus: number;
  memory_mib: number;
  ttl_seconds: number;
  max_ttl_seconds: number;
  expires_at: NullableTimestamp;
  workflow_id: string | null;
  owner_id: string | null;
  agent_id: string | null;
  version: Generated<number>;
  created_at: Timestamp;
  ready_at: NullableTimestamp;
  /** When a create took it from the warm pool: its lifetime counts from here. */
  claimed_at: NullableTimestamp;
  updated_at: Timestamp;
  deleted_at: NullableTimestamp;
}

export interface SandboxSnapshotsTable {
  id: string;
  tenant_id: string;
  sandbox_id: string;
  template_id: string;
  node_id: string;
  state: SnapshotState;
  memory: boolean;
  keep: boolean;
  size_bytes: ColumnType<string | null, number | string | null, number | string | null>;
  reason: string | null;
  owner_id: string | null;
  workflow_id: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  deleted_at: NullableTimestamp;
}

export interface SandboxVolumesTable {
  id: string;
  tenant_id: string;
  pool_id: string;
  node_id: string | null;
  name: string;
  size_gib: number;
  state: VolumeState;
  reason: string | null;
  owner_id: string | null;
  workflow_id: string | null;
  version: Generated<number>;
  created_at: Timestamp;
  updated_at: Timestamp;
  deleted_at: NullableTimestamp;
}

export interface SandboxQuotasTable {
  tenant_id: string;
  pool_id: string;
  resource: 'sandboxes' | 'vcpus' | 'memoryMiB';
  limit_value: number | null;
  updated_at: Timestamp;
}

export interface SandboxTables extends VpsTables {
  'compute.sandbox_quotas': SandboxQuotasTable;
  'compute.sandbox_templates': SandboxTemplatesTable;
  'compute.sandboxes': SandboxesTable;
  'compute.sandbox_snapshots': SandboxSnapshotsTable;
  'compute.sandbox_volumes': SandboxVolumesTable;
}

export type SandboxDb = Kysely<SandboxTables>;
export const sandboxDb = (db: Kysely<ComputeTables>): SandboxDb => db as unknown as SandboxDb;
export type TemplateRow = Selectable<SandboxTemplatesTable>;
export type SandboxRow = Selectable<SandboxesTable>;
export type SnapshotRow = Selectable<SandboxSnapshotsTable>;
export type VolumeRow = Selectable<SandboxVolumesTable>;
