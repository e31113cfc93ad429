/**
 * The metal invariants of `sim --metal N`, checked at the full-check cadence against the store
 * itself and against core's transition table (never through the metal module's own functions, which
 * would share their bugs):
 *
 * - every `metal.state-changed` event goes where the table allows from where the last one left the
 *   machine (a verb's start is `nextState`; a workflow landing goes from its `via` to `to` or
 *   `failed`), and the events replay to each machine's provision state;
 * - power_state changes only with a `metal.powered` event, or with the landing of a verify, inspect
 *   or clean workflow (which records what its last BMC call answered);
 * - a machine in a transient state has its verb's workflow running, and has been in that state no
 *   longer than its steps' timeouts plus one step (the running step no longer than its own plus one);
 * - a retired machine has no running metal.verify, metal.inspect or metal.clean workflow, and none
 *   of their commands is open.
 */
import {
  type MetalState,
  type MetalVerb,
  nextState,
  runningTransition,
  transitionOf,
  TRANSITIONS,
} from '@better-compute/core';
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import { type EventCursor, eventsAfter, type Violation } from './invariants.js';

type Db = Kysely<ComputeTables>;

/** The workflow kind of each verb that runs one (metal/service.ts's workflowFor). */
const WORKFLOW_OF: Readonly<Partial<Record<MetalVerb, string>>> = {
  manage: 'metal.verify',
  inspect: 'metal.inspect',
  provide: 'metal.clean',
};
const VERB_WORKFLOWS = Object.values(WORKFLOW_OF);

/** Whether the table allows `verb` to take a machine from `from` to `to`. */
function allowed(verb: string, from: MetalState, to: MetalState): boolean {
  if (verb === 'abort') return nextState('abort', from) === to;
  if (!TRANSITIONS.some((t) => t.verb === verb)) return false;
  const rule = transitionOf(verb as MetalVerb);
  // A workflow landing: from the state it held to where it ends.
  if (rule.via !== null && from === rule.via) return to === rule.to || to === rule.failed;
  return nextState(rule.verb, from) === to;
}

/**
 * Folds the metal events into each machine's provision state, and what explains a change of its
 * power since the last comparison, incrementally as a reader of the outbox would.
 */
export class MetalReplay {
  readonly states = new Map<string, MetalState>();
  #after: EventCursor = { tx: '0', index: -1 };
  /** Since the last comparison: the power the last metal.powered said, or 'landed' after a landing. */
  #powerSince = new Map<string, string>();
  /** The power_state each machine had at the last comparison. */
  #power = new Map<string, string>();

  /** Reads the events since the last call; answers the transitions the table does not allow. */
  async catchUp(db: Db, step: number): Promise<Violation[]> {
    const violations: Violation[] = [];
    for (const row of await eventsAfter(db, this.#after, 'metal.')) {
      this.#after = { tx: row.tx, index: row.tx_index };
      const id = row.subject_id ?? '';
      if (row.type === 'metal.enrolled') this.states.set(id, 'enroll');
      else if (row.type === 'metal.powered') this.#powerSince.set(id, String(row.data.powerState));
      else if (row.type === 'metal.state-changed') {
        const { verb, from, to } = row.data as { verb: string; from: MetalState; to: MetalState };
        const was = this.states.get(id);
        if (was !== from)
          violations.push({
            step,
            invariant: 'metal-events-replay',
            message: `machine ${id}: a ${verb} event moves it from ${from}, and its events left it ${was ?? 'unknown'}`,
          });
        if (!allowed(verb, from, to))
          violations.push({
            step,
            invariant: 'metal-transitions',
            message: `machine ${id}: ${verb} took it from ${from} to ${to}, which core's table does not allow`,
          });
        // A landing records the power its workflow's last BMC call answered.
        if (runningTransition(from)?.verb === verb) this.#powerSince.set(id, 'landed');
        this.states.set(id, to);
      }
    }
    return violations;
  }

  /** The table against the events: provision states, and power changed only where an event says. */
  async compare(db: Db, step: number): Promise<Violation[]> {
    const violations: Violation[] = [];
    const rows = (
      await sql<{ id: string; provision_state: MetalState; power_state: string }>`
      select id, provision_state, power_state from compute.metal_machines order by id`.execute(db)
    ).rows;
    for (const row of rows) {
      const replayed = this.states.get(row.id);
      if (replayed !== row.provision_state)
        violations.push({
          step,
          invariant: 'metal-events-replay',
          message: `machine ${row.id} is ${row.provision_state} in the table, ${replayed ?? 'unknown'} from events`,
        });
      const before = this.#power.get(row.id) ?? 'unknown';
      const since = this.#powerSince.get(row.id);
      if (since === undefined ? row.power_state !== before : since !== 'landed' && since !== row.power_state)
        violations.push({
          step,
          invariant: 'metal-power-explained',
          message: `machine ${row.id}'s power went from ${before} to ${row.power_state}, and its events since say ${since ?? 'nothing'}`,
        });
      this.#power.set(row.id, row.power_state);
    }
    this.#powerSince.clear();
    if (rows.length !== this.states.size)
      violations.push({
        step,
        invariant: 'metal-events-replay',
        message: `${rows.length} machines in the table, ${this.states.size} from events`,
      });
    return violations;
  }
}

interface StepRow {
  state: string;
  startedAt: string | null;
  params?: { timeoutMs?: unknown } | undefined;
}

/** All the metal invariants at `now`; `stepMs` is one step of the virtual clock. */
export async function checkMetal(
  db: Db,
  step: number,
  now: Date,
  stepMs: number,
  replay: MetalReplay,
): Promise<Violation[]> {
  const violations = [...(await replay.catchUp(db, step)), ...(await replay.compare(db, step))];
  const add = (invariant: string, message: string) => violations.push({ step, invariant, message });
  const transient = (
    await sql<{
      id: string;
      provision_state: MetalState;
      state_changed_at: Date;
      kind: string | null;
      state: string | null;
      steps: StepRow[] | null;
    }>`
    select m.id, m.provision_state, m.state_changed_at, w.kind, w.state, w.steps
    from compute.metal_machines m left join compute.workflows w on w.id = m.workflow_id
    where m.provision_state in ('verifying', 'inspecting', 'cleaning')
    order by m.id`.execute(db)
  ).rows;
  const timeoutOf = (s: StepRow) => {
    const ms = Number(s.params?.timeoutMs);
    return Number.isFinite(ms) ? ms : Infinity;
  };
  for (const row of transient) {
    const verb = runningTransition(row.provision_state)?.verb;
    const kind = verb ? WORKFLOW_OF[verb] : undefined;
    if (!kind || row.kind !== kind || row.state !== 'running') {
      add(
        'metal-transient-has-workflow',
        `machine ${row.id} is ${row.provision_state} and its workflow is ${row.kind ?? 'missing'} ${row.state ?? ''}`.trim(),
      );
      continue;
    }
    const steps = row.steps ?? [];
    const held = now.getTime() - new Date(row.state_changed_at).getTime();
    const bound = steps.reduce((sum, s) => sum + timeoutOf(s), 0) + stepMs;
    if (held > bound)
      add(
        'metal-transient-bounded',
        `machine ${row.id} has been ${row.provision_state} for ${held / 1000} s, past its steps' timeouts plus one step (${bound / 1000} s)`,
      );
    const running = steps.find((s) => s.state === 'running');
    const ran = running?.startedAt ? now.getTime() - Date.parse(running.startedAt) : 0;
    if (running && ran > timeoutOf(running) + stepMs)
      add(
        'metal-transient-bounded',
        `machine ${row.id}'s running step has run ${ran / 1000} s, past its timeout plus one step (${(timeoutOf(running) + stepMs) / 1000} s)`,
      );
  }
  const retired = (
    await sql<{
      id: string;
      workflow_id: string;
      kind: string;
      command_id: string | null;
      command_state: string;
    }>`
    select m.id, w.id as workflow_id, w.kind, c.id as command_id, coalesce(c.state, w.state) as command_state
    from compute.metal_machines m
    join compute.workflows w on w.input->>'machineId' = m.id and w.kind = any(${VERB_WORKFLOWS}::text[])
    left join compute.commands c on c.workflow_id = w.id and c.state in ('queued', 'sent', 'running')
    where m.provision_state = 'retired' and (w.state in ('running', 'paused') or c.id is not null)
    order by m.id, w.id, c.id`.execute(db)
  ).rows;
  for (const row of retired)
    add(
      'metal-retired-idle',
      row.command_id
        ? `retired machine ${row.id} has command ${row.command_id} of its ${row.kind} workflow ${row.workflow_id} ${row.command_state}`
        : `retired machine ${row.id} has its ${row.kind} workflow ${row.workflow_id} ${row.command_state}`,
    );
  return violations;
}

/** Ids made at random (`cmd_…`, `wf_…`) put out of a message, so the hash is the seed's. */
const withoutIds = (text: string | null) => text?.replace(/\b[a-z]+_[0-9a-z]{26}\b/g, '…') ?? null;

/** The machines for the state hash, by name: their states, power, errors and what inspection found. */
export async function metalHashRows(db: Db): Promise<unknown[]> {
  const rows = (
    await sql<{
      name: string;
      provision_state: string;
      power_state: string;
      last_error: string | null;
      version: number;
      inspected_at: Date | null;
    }>`
    select name, provision_state, power_state, last_error, version, inspected_at
    from compute.metal_machines order by name`.execute(db)
  ).rows;
  return rows.map((r) => [
    r.name,
    r.provision_state,
    r.power_state,
    withoutIds(r.last_error),
    r.version,
    r.inspected_at ? new Date(r.inspected_at).toISOString() : null,
  ]);
}

/**
 * What the run came to: machines by state, and the steps the controller's timeouts failed (a BMC
 * call nobody answered in 120 s, a wait whose report never came), from the workflows themselves.
 */
export async function metalSummary(db: Db): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  const states = await sql<{ provision_state: string; n: number }>`
    select provision_state, count(*)::int as n from compute.metal_machines group by provision_state`.execute(
    db,
  );
  for (const row of states.rows) counts[`metal.machines.${row.provision_state}`] = row.n;
  const failed = await sql<{ kind: string; timeout: string; n: number }>`
    select w.kind,
      case when s.value->>'error' like '%did not answer within%' then 'bmc' else 'wait' end as timeout,
      count(*)::int as n
    from compute.workflows w cross join jsonb_array_elements(w.steps) as s(value)
    where w.kind like 'metal.%' and s.value->>'state' = 'failed'
      and (s.value->>'error' like '%did not answer within%' or s.value->>'error' like '%not done within%')
    group by 1, 2`.execute(db);
  for (const row of failed.rows) counts[`metal.timeout.${row.timeout}.${row.kind}`] = row.n;
  return counts;
}
