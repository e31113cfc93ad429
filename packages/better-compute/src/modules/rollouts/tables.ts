/** Kysely's view of the rollouts module's table. */
import type { ColumnType, Generated, Kysely, Selectable } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';

type Timestamp = ColumnType<Date, Date | string, Date | string>;

export interface RolloutNode {
  nodeId: string;
  state: 'pending' | 'updating' | 'succeeded' | 'failed' | 'skipped' | 'cancelled';
  workflowId: string | null;
  error: string | null;
  startedAt: string | null;
  finishedAt: string | null;
}

export interface RolloutWave {
  index: number;
  size: string;
  state: 'pending' | 'running' | 'passed' | 'failed';
  nodes: RolloutNode[];
  startedAt: string | null;
  finishedAt: string | null;
}

/**
 * Exported because exported functions' inferred types name it (TS4058 otherwise), though no file
 * imports it by name: knip.jsonc skips what is tagged so.
 * @lintignore
 */
export interface RolloutTarget {
  poolId: string | null;
  nodeIds: string[] | null;
  selector: string | null;
}

interface RolloutsTable {
  id: string;
  seq: Generated<string>;
  release_id: string;
  version: string;
  state: 'running' | 'paused' | 'aborted' | 'completed';
  target: ColumnType<RolloutTarget, string, string>;
  waves: ColumnType<RolloutWave[], string, string>;
  current_wave: number;
  failure_budget: number;
  health_timeout_seconds: number;
  reason: string | null;
  created_by: string;
  created_at: Timestamp;
  updated_at: Timestamp;
  finished_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
}

interface RolloutTables extends ComputeTables {
  'compute.rollouts': RolloutsTable;
}

export type RolloutRow = Selectable<RolloutsTable>;
export type RolloutsDb = Kysely<RolloutTables>;
export const rolloutsDb = (db: Kysely<ComputeTables>): RolloutsDb => db as unknown as RolloutsDb;
