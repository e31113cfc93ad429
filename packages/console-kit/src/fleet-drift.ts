/**
 * The Fleet drift page's view model (the console guide's "platform operators watch … fleet drift";
 * docs/fleet.md): what `fleet.status` answers (the last apply, and whether the live fleet drifted
 * from it as the `fleet.drift` job last saw, with each drifted object and field) and the fleet's own
 * events (`fleet.applied`, `fleet.drifted`, `fleet.converged`), newest first.
 *
 * Who may read it: the fleet methods are decided on compute:fleet:admin, which only the root
 * tenant's administrators hold. The view asks Better IAM first (advisory, so a person without it
 * never sends a refused call), and the server's ACCESS_DENIED means the same: `access` becomes
 * `refused`, a state a page shows as "platform operators only" rather than as an error.
 *
 * What keeps it live: every fleet event (`fleet` subject) re-reads the status and the events. The
 * job writes an event only when its verdict turns, so a check that finds the fleet still drifted
 * (perhaps with another change) or still converged tells nobody; the view therefore also reads the
 * status again when the next check is due, a minute after the last one (FLEET_DRIFT_CHECK_EVERY_MS).
 *
 * Nothing here applies anything: the guide has a person apply a reviewed plan from the CLI, so the
 * view offers the commands as text (`fleetCommands`). Every string from the server a person reads
 * passes through `safeCell`.
 */
import type { CallOutput, ComputeClient } from '@better-compute/client';
import { isComputeClientError } from '@better-compute/client';
import { safeCell } from '@better-compute/core';
import { describeAction } from './actions.js';
import type { LiveConsole, TrackedStore } from './live.js';
import type { Permissions } from './permissions.js';
import { DetailStore } from './stores.js';
import { ValueStore } from './subscribable.js';

export type FleetStatus = CallOutput<'fleet.status'>;
export type FleetDriftState = FleetStatus['drift']['state'];
export type FleetDriftChange = FleetStatus['drift']['changes'][number];
export type FleetEvent = CallOutput<'events.list'>['items'][number];
/** Whether the person may read the fleet: not known yet, yes, or no (platform operators only). */
export type FleetDriftAccess = 'checking' | 'allowed' | 'refused';

/** How often the server's fleet.drift job looks (its FLEET_DRIFT_EVERY_MS). */
export const FLEET_DRIFT_CHECK_EVERY_MS = 60_000;
/** How many of the fleet's latest events the view keeps. */
export const FLEET_EVENTS_SHOWN = 20;
/** The fleet events read at most (pages of 500, oldest first); fleet events are rare: applies and turns. */
const FLEET_EVENTS_READ_MAX = 10_000;
/** After a check is due, a little longer before reading, so the job has written its verdict. */
const AFTER_DUE_MS = 5_000;

/** One field of a drifted object: its value in the last apply's document, and its live value now. */
export interface FleetDriftField {
  field: string;
  /** JSON of the value as the last apply left it; `none` where the document had no such field. */
  documentValue: string;
  /** JSON of the value in the live fleet now; `none` where it has none. */
  liveValue: string;
}

/** One drifted object in words. */
export interface FleetDriftLine {
  op: FleetDriftChange['op'];
  kind: FleetDriftChange['kind'];
  /** `pool gpu-a`, through safeCell. */
  object: string;
  id: string | null;
  /** `changed since the apply`, `added since the apply`, `gone since the apply`. */
  what: string;
  fields: FleetDriftField[];
}

const KIND_WORDS: Record<FleetDriftChange['kind'], string> = {
  site: 'site',
  pool: 'pool',
  flavor: 'flavor',
  sandboxTemplate: 'sandbox template',
  providerAccount: 'provider account',
};

const shown = (value: unknown) =>
  value === undefined || value === null ? 'none' : safeCell(JSON.stringify(value));

/**
 * A drift change as a page shows it. In `fleet.status` a field's `from` is the value the last apply
 * left (the kept document) and `to` the live value, as the CLI prints `from → to`.
 */
export function describeDriftChange(change: FleetDriftChange): FleetDriftLine {
  return {
    op: change.op,
    kind: change.kind,
    object: `${KIND_WORDS[change.kind] ?? change.kind} ${safeCell(change.name)}`,
    id: change.id,
    what:
      change.op === '+'
        ? 'added since the apply'
        : change.op === '-'
          ? 'gone since the apply'
          : 'changed since the apply',
    fields: change.fields.map((field) => ({
      field: safeCell(field.field),
      documentValue: shown(field.from),
      liveValue: shown(field.to),
    })),
  };
}

/** A fleet event in words: `Applied (planHash 3f1c…, 4 calls)`, `Drifted: 2 differences`, `Converged`. */
export function describeFleetEvent(event: FleetEvent): string {
  const data = event.data;
  if (event.type === 'fleet.applied') {
    const calls = typeof data.calls === 'number' ? `, ${data.calls} call(s)` : '';
    const hash = typeof data.planHash === 'string' ? `planHash ${safeCell(data.planHash).slice(0, 12)}…` : '';
    return `Applied (${hash}${calls})`;
  }
  if (event.type === 'fleet.drifted')
    return `Drifted from the last apply: ${typeof data.changes === 'number' ? data.changes : '?'} difference(s)`;
  if (event.type === 'fleet.converged') return 'Converged: the live fleet is what the last apply left';
  return safeCell(event.type);
}

/** The CLI commands that act on what the page shows; a person runs them (the page applies nothing). */
export function fleetCommands(file = 'fleet.json'): {
  exportLive: string;
  plan: string;
  apply: string;
  status: string;
} {
  return {
    exportLive: `better-compute fleet export --out ${file}`,
    plan: `better-compute fleet plan ${file}`,
    apply: `better-compute fleet apply ${file} --plan-hash H`,
    status: 'better-compute fleet status --fail-on-drift',
  };
}

/** When the next drift check is due (ms since the epoch), or null when none will look (no apply yet). */
export function nextCheckDue(status: FleetStatus | null): number | null {
  if (!status?.applied || !status.drift.checkedAt) return null;
  const checked = Date.parse(status.drift.checkedAt);
  return Number.isNaN(checked) ? null : checked + FLEET_DRIFT_CHECK_EVERY_MS;
}

export interface FleetDriftViewOptions {
  /** The root tenant: the fleet is the platform's. */
  tenantId: string;
  /** Better IAM's advisory answers; without it the server's answer alone decides `access`. */
  permissions?: Permissions | undefined;
  /** How many of the latest fleet events to keep; default FLEET_EVENTS_SHOWN. */
  eventsShown?: number | undefined;
}

export interface FleetDriftView {
  readonly tenantId: string;
  readonly access: ValueStore<FleetDriftAccess>;
  /** fleet.status, as the server answers it. */
  readonly status: DetailStore<FleetStatus>;
  /** The latest fleet events, newest first. */
  readonly events: DetailStore<FleetEvent[]>;
  /** What fleet events keep current: the status and the events. */
  readonly tracked: TrackedStore;
  /** Registers `tracked` with a live console for the `fleet` subject; returns the undo. */
  connect(live: Pick<LiveConsole, 'track'>): () => void;
  /** Decides access, then reads the status and the events; re-reads each time a check is due. */
  start(): Promise<void>;
  /** Stops the timed re-read. */
  close(): void;
}

/**
 * The fleet drift view over a client.
 *
 * @example
 * const drift = createFleetDriftView(client, { tenantId: 'root', permissions });
 * const undo = drift.connect(live);
 * drift.status.subscribe(() => render(drift.access.get(), drift.status.get()));
 * await drift.start();
 */
export function createFleetDriftView(client: ComputeClient, options: FleetDriftViewOptions): FleetDriftView {
  const { tenantId, permissions } = options;
  const keep = options.eventsShown ?? FLEET_EVENTS_SHOWN;
  const access = new ValueStore<FleetDriftAccess>('checking');
  let timer: ReturnType<typeof setTimeout> | undefined;
  let closed = false;

  const refusedBy = (error: unknown) => isComputeClientError(error) && error.code === 'ACCESS_DENIED';

  const status = new DetailStore<FleetStatus>(async () => {
    try {
      const answer = await client.call('fleet.status', { tenantId });
      access.set('allowed');
      schedule(answer);
      return answer;
    } catch (error) {
      if (refusedBy(error)) access.set('refused');
      throw error;
    }
  });

  const events = new DetailStore<FleetEvent[]>(async () => {
    // events.list answers oldest first; fleet events are few (an apply, a verdict turning), so the
    // pages are read to the end and the last ones kept.
    const latest: FleetEvent[] = [];
    let cursor: string | undefined;
    let read = 0;
    do {
      const page = await client.call('events.list', {
        tenantId,
        type: 'fleet.',
        limit: 500,
        ...(cursor ? { cursor } : {}),
      });
      read += page.items.length;
      latest.push(...page.items);
      latest.splice(0, Math.max(0, latest.length - keep));
      cursor = page.nextCursor ?? undefined;
    } while (cursor && read < FLEET_EVENTS_READ_MAX);
    return latest.reverse();
  });

  function schedule(answer: FleetStatus) {
    clearTimeout(timer);
    const due = nextCheckDue(answer);
    if (closed || due === null) return;
    // Never sooner than a few seconds: a job that is late must not make the page read in a loop.
    const wait = Math.max(due + AFTER_DUE_MS - Date.now(), AFTER_DUE_MS);
    timer = setTimeout(() => void refreshAll(), wait);
  }

  async function refreshAll(): Promise<void> {
    if (closed || access.get() === 'refused') return;
    await Promise.all([status.refresh(), events.refresh()]);
  }

  const tracked: TrackedStore = {
    get loaded() {
      return status.loaded;
    },
    refresh: refreshAll,
    refreshItem: () => refreshAll(),
  };

  return {
    tenantId,
    access,
    status,
    events,
    tracked,
    connect: (live) => live.track('fleet', tracked),
    async start() {
      if (permissions) {
        const allowed = await permissions.can(describeAction('fleet', 'status')).catch(() => undefined);
        // Unanswered (IAM unreachable) is not "no": the server decides the read below.
        if (allowed === false) {
          access.set('refused');
          return;
        }
      }
      await status.refresh();
      if (access.get() === 'allowed') await events.refresh();
    },
    close() {
      closed = true;
      clearTimeout(timer);
    },
  };
}
