/** Kysely's view of the commands module's tables. */
import type { ColumnType, Generated, Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';

/**
 * Gateways listen here: a NOTIFY names a node with a command to deliver (queued, or released from
 * its batch), heard at commit.
 */
export const COMMANDS_CHANNEL = 'compute_commands';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type Json<T> = ColumnType<T, string, string>;

interface CommandsTable {
  id: string;
  seq: Generated<string>;
  tenant_id: string;
  node_id: string;
  workflow_id: string | null;
  kind: string;
  payload: Json<Record<string, unknown>>;
  state: 'queued' | 'sent' | 'running' | 'succeeded' | 'failed' | 'cancelled';
  attempt: Generated<number>;
  cancel_requested: Generated<boolean>;
  exit_code: number | null;
  stdout: Generated<string>;
  stderr: Generated<string>;
  result: ColumnType<Record<string, unknown> | null, string | null, string | null>;
  error: string | null;
  created_at: Timestamp;
  expires_at: Timestamp;
  sent_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  started_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  finished_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  /** The batch it is a member of (modules/batches), its leaf's index and inclusion proof (hex). */
  batch_id: ColumnType<string | null, string | null | undefined, never>;
  batch_index: ColumnType<number | null, number | null | undefined, never>;
  batch_proof: ColumnType<string[] | null, string | null | undefined, never>;
  /** A member of a batch not approved yet: never delivered, whatever its state. */
  held: ColumnType<boolean, boolean | undefined, boolean>;
}

interface NodeSessionsTable {
  node_id: string;
  tenant_id: string;
  gateway_id: string;
  daemon_version: string;
  capabilities: Json<string[]>;
  hardware: Json<Record<string, unknown>>;
  connected_at: Timestamp;
  last_seen_at: Timestamp;
}

interface CommandTables extends ComputeTables {
  'compute.commands': CommandsTable;
  'compute.node_sessions': NodeSessionsTable;
}

export type CommandsDb = Kysely<CommandTables>;
export const commandsDb = (db: Kysely<ComputeTables>): CommandsDb => db as unknown as CommandsDb;
export type CommandRow = import('kysely').Selectable<CommandsTable>;
