/**
 * What a kind of workflow does beside its steps: what its `wait` steps wait for, after a step
 * queues a command (a simulated node's executor takes it from there), and when the workflow ends, in the transaction that ends it, so the
 * thing the workflow changes (an instance) moves with it or not at all. A module registers the
 * hooks of its kinds when it is loaded; node maintenance has none.
 */
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { EventDraft } from '../define-module.js';
import type { WorkflowRow, WorkflowStep } from './tables.js';

export interface WorkflowHookContext {
  db: Kysely<ComputeTables>;
  workflow: WorkflowRow;
  steps: readonly WorkflowStep[];
  now: Date;
  emit(event: EventDraft): void;
}

/** What a `wait` step's check answers: done, not yet, or failed with the reason. */
export type WaitOutcome = { done: boolean } | { failed: string };

export interface WorkflowHooks {
  /** A `wait` step's check, run under the workflow's lock each time the controller looks. */
  check?(context: WorkflowHookContext, step: WorkflowStep): Promise<WaitOutcome>;
  /** A command step queued its command. */
  commandQueued?(context: WorkflowHookContext, command: { id: string; kind: string }): Promise<void>;
  /** Every step succeeded. */
  succeeded?(context: WorkflowHookContext): Promise<void>;
  /** A step failed, or the workflow was aborted; `error` says what happened. */
  failed?(context: WorkflowHookContext, error: string): Promise<void>;
}

const registry = new Map<string, WorkflowHooks>();

export function registerWorkflowHooks(kinds: readonly string[], hooks: WorkflowHooks): void {
  for (const kind of kinds) registry.set(kind, hooks);
}

export function hooksOf(kind: string): WorkflowHooks {
  return registry.get(kind) ?? {};
}
