/** Kysely's view of the workflows module's table. */
import type { ColumnType, Kysely, Selectable } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

export interface WorkflowStep {
  name: string;
  kind:
    | 'node.drain'
    | 'node.wait-drained'
    | 'command'
    | 'node.uncordon'
    /** Until the node's session reports `params.version`, connected since the workflow began; failed past `params.deadline`. */
    | 'node.wait-version'
    /** No command of the node failed since the workflow began. */
    | 'node.no-failed-commands'
    /**
     * Until the workflow kind's own check (its hooks' `check`) says done; failed `params.timeoutMs`
     * after it started, checked again every `params.recheckMs` (or when something wakes it).
     */
    | 'wait';
  /** What a waiting step checks against (node.wait-version: version, deadline). */
  params?: Record<string, unknown> | undefined;
  state: 'pending' | 'running' | 'succeeded' | 'failed' | 'skipped';
  attempt: number;
  commandId: string | null;
  /** The command a command step queues; a node-maintenance step without one runs the workflow's script. */
  command?: { kind: string; payload: Record<string, unknown> } | undefined;
  commandKind?: string | null;
  error: string | null;
  startedAt: string | null;
  finishedAt: string | null;
}

export type WorkflowKind =
  | 'node.maintenance'
  | 'instance.create'
  | 'instance.start'
  | 'instance.stop'
  | 'instance.resize'
  | 'instance.delete'
  | 'sandbox.create'
  | 'sandbox.certify'
  | 'sandbox.delete'
  | 'sandbox.snapshot'
  | 'sandbox.snapshot-delete'
  | 'volume.create'
  | 'volume.resize'
  | 'volume.delete'
  | 'node.update'
  /** A bare-metal machine's transitions, run on its site's agent (modules/metal). */
  | 'metal.verify'
  | 'metal.inspect'
  | 'metal.clean'
  | 'metal.power';

interface WorkflowsTable {
  id: string;
  tenant_id: string;
  node_id: string;
  kind: WorkflowKind;
  /** The instance an instance workflow changes (migration 0002). */
  instance_id: ColumnType<string | null, string | null | undefined, string | null>;
  state: 'running' | 'paused' | 'failed' | 'succeeded' | 'aborted';
  current_step: number;
  steps: ColumnType<WorkflowStep[], string, string>;
  input: ColumnType<Record<string, unknown>, string, string>;
  reason: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  finished_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
}

interface WorkflowTables extends ComputeTables {
  'compute.workflows': WorkflowsTable;
}

export type WorkflowsDb = Kysely<WorkflowTables>;
export const workflowsDb = (db: Kysely<ComputeTables>): WorkflowsDb => db as unknown as WorkflowsDb;
export type WorkflowRow = Selectable<WorkflowsTable>;
