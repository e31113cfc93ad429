/** Kysely's view of the fleet's tables (see migrations.ts). */
import type { ColumnType, Generated, Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
type Json<T> = ColumnType<T, string, string>;

export interface SitesTable {
  id: string;
  tenant_id: string;
  name: string;
  region: string | null;
  description: string;
  labels: Json<Record<string, string>>;
  version: Generated<number>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ProjectsTable {
  id: string;
  tenant_id: string;
  name: string;
  description: string;
  state: Generated<'active' | 'archived'>;
  version: Generated<number>;
  created_at: Timestamp;
  archived_at: NullableTimestamp;
}

export interface PoolsTable {
  id: string;
  tenant_id: string;
  site_id: string;
  name: string;
  class: 'gpu' | 'vps' | 'metal';
  driver: string;
  state: Generated<'active' | 'archived'>;
  description: string;
  labels: Json<Record<string, string>>;
  version: Generated<number>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

interface PoolOffersTable {
  pool_id: string;
  tenant_id: string;
  created_at: Timestamp;
}

interface PendingOffersTable {
  pool_id: string;
  tenant_id: string;
  offered_at: Timestamp;
}

interface QuotasTable {
  tenant_id: string;
  pool_id: string;
  resource: 'gpus' | 'reservations';
  /** Null once cleared: the row stays, so its version keeps counting. */
  limit_value: number | null;
  version: Generated<number>;
  updated_at: Timestamp;
}

export interface JoinTokensTable {
  id: string;
  tenant_id: string;
  pool_id: string;
  secret_hash: string;
  description: string;
  uses_allowed: number;
  uses: Generated<number>;
  pre_approved: boolean;
  expires_at: Timestamp;
  revoked_at: NullableTimestamp;
  created_at: Timestamp;
}

export interface StoredInventory {
  cpuCores: number;
  memoryGiB: number;
  gpus: { index: number; model: string; product: string; vramGiB: number; nvlinkDomain: string | null }[];
}

export interface JoinRequestsTable {
  id: string;
  tenant_id: string;
  pool_id: string;
  join_token_id: string;
  hostname: string;
  inventory: Json<StoredInventory>;
  labels: Json<Record<string, string>>;
  state: 'pending' | 'approved' | 'rejected';
  claim_hash: string | null;
  claimed: Generated<boolean>;
  node_id: string | null;
  reason: string | null;
  created_at: Timestamp;
  decided_at: NullableTimestamp;
}

export type NodeState = 'joining' | 'ready' | 'cordoned' | 'draining' | 'drained' | 'offline' | 'retired';
export interface Taint {
  key: string;
  value: string;
  effect: 'NoSchedule';
}

/** What a node is for: work, or its site's agent (joined with a site token). */
export type NodeRole = 'worker' | 'site-agent';

export interface NodesTable {
  id: string;
  seq: Generated<number>;
  tenant_id: string;
  pool_id: string;
  name: string;
  state: NodeState;
  state_before_offline: NodeState | null;
  /** `site-agent` for a node joined with a site token (since 0012). */
  role: Generated<NodeRole>;
  labels: Json<Record<string, string>>;
  taints: Json<Taint[]>;
  no_schedule: ColumnType<string[], string[], string[]>;
  cpu_cores: number;
  memory_gib: number;
  /** The inventory in use is node_inventories at this revision (the node's row keeps no copy since 0005). */
  inventory_revision: Generated<number>;
  reported_revision: Generated<number>;
  credential_hash: string | null;
  gpu_count: number;
  free_gpus: number;
  last_heartbeat_at: NullableTimestamp;
  state_changed_at: Timestamp;
  version: Generated<number>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/**
 * Exported because exported functions' inferred types name it (TS4058 otherwise), though no file
 * imports it by name: knip.jsonc skips what is tagged so.
 * @lintignore
 */
export interface GpuGroupsTable {
  node_id: string;
  group_no: number;
  pool_id: string;
  model: string;
  product: string;
  vram_gib: number;
  nvlink_domain: string | null;
  total: number;
  free: number;
  /** The group's GPU indices on the node, ascending. */
  gpu_indices: ColumnType<number[], number[], number[]>;
  /** Parallel to gpu_indices: the reservation holding each GPU, or null (migration 0003). */
  holders: ColumnType<(string | null)[], (string | null)[], (string | null)[]>;
  /** The node's state, copied by triggers (migration 0002): what capacity reads without the nodes. */
  node_state: Generated<string>;
}

interface GpusTable {
  node_id: string;
  idx: number;
  group_no: number;
  pool_id: string;
  model: string;
  product: string;
  vram_gib: number;
  nvlink_domain: string | null;
}

interface NodeInventoriesTable {
  node_id: string;
  revision: number;
  inventory: Json<StoredInventory>;
  recorded_at: Timestamp;
}

type ReservationState = 'queued' | 'active' | 'ended';
export type EndReason = 'released' | 'expired' | 'cancelled' | 'node-retired';

export interface ReservationsTable {
  id: string;
  seq: Generated<number>;
  tenant_id: string;
  pool_id: string;
  project_id: string | null;
  state: ReservationState;
  gpus: number;
  duration_seconds: number;
  nvlink: boolean;
  selector: string | null;
  gpu_model: string | null;
  gpu_product: string | null;
  tolerations: ColumnType<string[], string[], string[]>;
  created_at: Timestamp;
  activated_at: NullableTimestamp;
  ends_at: NullableTimestamp;
  ended_at: NullableTimestamp;
  end_reason: EndReason | null;
  version: Generated<number>;
  /** The person or service account it belongs to; null for reservations made before owners. */
  owner_id: string | null;
  /** The agent that made it for its owner, when one did. */
  agent_id: string | null;
  /** The instance whose GPUs it holds (then it has no end), or null for a tenant's own reservation. */
  instance_id: ColumnType<string | null, string | null | undefined, string | null>;
}

interface GpuBindingsTable {
  id: Generated<number>;
  reservation_id: string;
  tenant_id: string;
  pool_id: string;
  node_id: string;
  group_no: number;
  /** The GPUs' indices on the node, ascending (migration 0003: one row per reservation, node and group). */
  gpu_indices: ColumnType<number[], number[], number[]>;
  gpu_count: number;
  model: string;
  product: string;
  nvlink_domain: string | null;
  bound_at: Timestamp;
  released_at: NullableTimestamp;
}

export interface FleetTables extends ComputeTables {
  'compute.sites': SitesTable;
  'compute.projects': ProjectsTable;
  'compute.pools': PoolsTable;
  'compute.pool_offers': PoolOffersTable;
  'compute.pending_offers': PendingOffersTable;
  'compute.quotas': QuotasTable;
  'compute.join_tokens': JoinTokensTable;
  'compute.join_requests': JoinRequestsTable;
  'compute.nodes': NodesTable;
  'compute.gpu_groups': GpuGroupsTable;
  'compute.gpus': GpusTable;
  'compute.node_inventories': NodeInventoriesTable;
  'compute.reservations': ReservationsTable;
  'compute.gpu_bindings': GpuBindingsTable;
}

export type FleetDb = Kysely<FleetTables>;

/** The fleet's view of a call's database handle. */
export function fleetDb(db: Kysely<ComputeTables>): FleetDb {
  return db as unknown as FleetDb;
}
