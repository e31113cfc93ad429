/**
 * The Rollouts page's view model (the console guide's rollouts, shown to platform operators when
 * the deployment pins release keys): the rollouts of bcd releases, newest first, filtered by state;
 * one rollout's waves and nodes with their states and timings, kept live from the event stream; and
 * Pause, Resume and Abort, each decided by the rollout's state here and by Better IAM (advisory)
 * before the API decides the call.
 *
 * What keeps it live: every change of a rollout's row has an event of the rollout (`rollout.*`:
 * created, a wave started or passed, a node succeeded or failed, paused, resumed, aborted,
 * completed), and each re-reads that one rollout, in the list and in every open details of it.
 *
 * Every string from the server a person reads passes through `safeCell`.
 */
import type { CallOutput, ComputeClient } from '@better-compute/client';
import { safeCell } from '@better-compute/core';
import { describeAction, type ActionDescription } from './actions.js';
import type { LiveConsole, TrackedStore } from './live.js';
import { stateList } from './state-list.js';
import { DetailStore, isGone, type ListStore } from './stores.js';
import type { ValueStore } from './subscribable.js';

export type Rollout = CallOutput<'rollouts.get'>;
export type RolloutState = Rollout['state'];
export type RolloutWave = Rollout['waves'][number];
export type RolloutNode = RolloutWave['nodes'][number];
export type RolloutNodeState = RolloutNode['state'];
/** The list's filter: one state, or every rollout. */
export type RolloutFilter = RolloutState | 'all';
/** What an operator may do to a rollout. */
export type RolloutAction = 'pause' | 'resume' | 'abort';

export const ROLLOUT_FILTERS: readonly RolloutFilter[] = ['all', 'running', 'paused', 'aborted', 'completed'];
export const ROLLOUT_ACTIONS: readonly RolloutAction[] = ['pause', 'resume', 'abort'];
export const ROLLOUT_NODE_STATES: readonly RolloutNodeState[] = [
  'pending',
  'updating',
  'succeeded',
  'failed',
  'skipped',
  'cancelled',
];

/** The states each action is allowed from (the server's rule, docs/rollouts.md). */
const ALLOWED: Record<RolloutAction, readonly RolloutState[]> = {
  pause: ['running'],
  resume: ['paused'],
  abort: ['running', 'paused'],
};

export const isRolloutFilter = (value: unknown): value is RolloutFilter =>
  typeof value === 'string' && (ROLLOUT_FILTERS as readonly string[]).includes(value);

/** Whether the rollout's state allows the action; the API still decides. */
export const isRolloutActionAllowed = (rollout: Pick<Rollout, 'state'>, action: RolloutAction): boolean =>
  ALLOWED[action].includes(rollout.state);

/** How many of a rollout's (or a wave's) nodes are in each state. */
export function countNodes(
  waves: readonly Pick<RolloutWave, 'nodes'>[],
): Record<RolloutNodeState, number> & { total: number } {
  const counts = Object.fromEntries(ROLLOUT_NODE_STATES.map((state) => [state, 0])) as Record<
    RolloutNodeState,
    number
  >;
  let total = 0;
  for (const wave of waves)
    for (const node of wave.nodes) {
      counts[node.state] = (counts[node.state] ?? 0) + 1;
      total += 1;
    }
  return { ...counts, total };
}

/** A duration in words: `850 ms`, `12 s`, `3 min 04 s`, `2 h 05 min`. */
export function durationText(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const seconds = Math.floor(ms / 1000);
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${String(seconds % 60).padStart(2, '0')} s`;
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, '0')} min`;
}

/**
 * How long something with `startedAt` and `finishedAt` took, or has taken so far at `now` (ms);
 * null before it started. `running` says the clock still runs.
 */
export function elapsed(
  item: { startedAt: string | null; finishedAt: string | null },
  now: number,
): { ms: number; running: boolean; text: string } | null {
  if (!item.startedAt) return null;
  const start = Date.parse(item.startedAt);
  if (Number.isNaN(start)) return null;
  const end = item.finishedAt ? Date.parse(item.finishedAt) : now;
  const ms = Math.max(0, (Number.isNaN(end) ? now : end) - start);
  return { ms, running: !item.finishedAt, text: durationText(ms) };
}

/** What a row says of a rollout, every string through safeCell. */
export function describeRollout(rollout: Rollout): {
  /** `pool pool_…`, `3 named nodes`, `selector rack=a`. */
  target: string;
  /** `wave 2 of 3`, or `3 waves` once finished. */
  progress: string;
  /** `4 of 10 nodes updated, 1 failed, 1 updating`. */
  nodes: string;
  reason: string | null;
} {
  const { target } = rollout;
  const targetText = target.poolId
    ? `pool ${target.poolId}`
    : target.nodeIds
      ? `${target.nodeIds.length} named node(s)`
      : `selector ${target.selector ?? ''}`;
  const waves = rollout.waves.length;
  const finished = rollout.state === 'completed' || rollout.state === 'aborted';
  const progress = finished
    ? `${waves} wave(s)`
    : `wave ${Math.min(rollout.currentWave + 1, waves)} of ${waves}`;
  const counts = countNodes(rollout.waves);
  const parts = [`${counts.succeeded} of ${counts.total} node(s) updated`];
  for (const state of ['updating', 'failed', 'cancelled', 'skipped'] as const)
    if (counts[state] > 0) parts.push(`${counts[state]} ${state}`);
  return {
    target: safeCell(targetText),
    progress,
    nodes: parts.join(', '),
    reason: rollout.reason === null ? null : safeCell(rollout.reason),
  };
}

/** The confirmation question of an action, naming what happens. */
export function rolloutQuestion(rollout: Rollout, action: RolloutAction): string {
  const counts = countNodes(rollout.waves);
  const version = safeCell(rollout.version);
  if (action === 'pause')
    return `Pause the rollout ${rollout.id} of bcd ${version}? No further wave starts; the ${counts.updating} node(s) updating now finish.`;
  if (action === 'resume') {
    const failedWave = rollout.waves[rollout.currentWave]?.state === 'failed';
    return `Resume the rollout ${rollout.id} of bcd ${version}?${
      failedWave
        ? ` Wave ${rollout.currentWave + 1} failed its gate and is accepted as it is (its failed nodes stay on their old version);`
        : ''
    } the next wave starts.`;
  }
  return `Abort the rollout ${rollout.id} of bcd ${version}? The ${counts.pending} node(s) not yet started never receive it, and updates not yet run on their node are cancelled. This cannot be undone.`;
}

export interface RolloutsViewOptions {
  /** The root tenant: rollouts are the platform's. */
  tenantId: string;
  /** Rollouts per list page; default 50. */
  pageSize?: number | undefined;
  /** The list's first filter; default all. */
  filter?: RolloutFilter | undefined;
}

export interface RolloutsView {
  readonly tenantId: string;
  /** The rollouts of the current filter, newest first. */
  readonly list: ListStore<Rollout>;
  readonly filter: ValueStore<RolloutFilter>;
  /**
   * What a rollout's events keep current: the list's row and every open `details` store of it are
   * read again; a rollout that left the filter's state leaves the list.
   */
  readonly tracked: TrackedStore;
  /** Registers `tracked` with a live console for the `rollout` subject; returns the undo. */
  connect(live: Pick<LiveConsole, 'track'>): () => void;
  /** Shows another state's rollouts (reads the list again). */
  setFilter(filter: RolloutFilter): Promise<void>;
  /** One rollout, its waves and nodes; kept live while it is open (until `close`). */
  details(rolloutId: string): DetailStore<Rollout> & { close(): void };
  /** Pause, resume or abort; the answer updates the list and any open details. */
  steer(rolloutId: string, action: RolloutAction): Promise<Rollout>;
  /** What an action is decided as (compute:rollouts:ACTION on the rollout), for the permission check. */
  actionOf(rolloutId: string, action: RolloutAction): ActionDescription;
}

/**
 * The rollouts view over a client.
 *
 * @example
 * const rollouts = createRolloutsView(client, { tenantId: 'root' });
 * const undo = rollouts.connect(live);
 * rollouts.list.subscribe(() => render(rollouts.list.get()));
 * await rollouts.list.refresh();
 */
export function createRolloutsView(client: ComputeClient, options: RolloutsViewOptions): RolloutsView {
  const { tenantId } = options;
  const pageSize = options.pageSize ?? 50;
  const readOne = (rolloutId: string) => client.call('rollouts.get', { tenantId, rolloutId });
  const {
    list,
    filter,
    tracked: listTracked,
    setFilter,
    place,
  } = stateList<Rollout, RolloutFilter>({
    filter: options.filter ?? 'all',
    load: (state, cursor) =>
      client.call('rollouts.list', {
        tenantId,
        limit: pageSize,
        ...(state ? { state } : {}),
        ...(cursor ? { cursor } : {}),
      }),
    readOne,
  });
  /** The open details stores, by rollout id. */
  const open = new Map<string, Set<DetailStore<Rollout>>>();

  /** Puts a rollout read anew into the list and every open details of it. */
  function show(rollout: Rollout): Rollout {
    if (list.loaded) place(rollout);
    for (const store of open.get(rollout.id) ?? []) void store.refresh();
    return rollout;
  }

  async function reread(rolloutId: string): Promise<void> {
    const inList = list.loaded;
    const details = open.get(rolloutId);
    if (!inList && !details?.size) return;
    if (inList) await listTracked.refreshItem!(rolloutId);
    await Promise.all([...(details ?? [])].map((store) => store.refresh()));
  }

  const tracked: TrackedStore = {
    get loaded() {
      return list.loaded || open.size > 0;
    },
    async refresh() {
      await Promise.all([
        list.loaded ? list.refresh() : Promise.resolve(),
        ...[...open.values()].flatMap((stores) => [...stores].map((store) => store.refresh())),
      ]);
    },
    refreshItem: (id) => reread(id),
  };

  return {
    tenantId,
    list,
    filter,
    tracked,
    connect: (live) => live.track('rollout', tracked),
    setFilter,
    details(rolloutId) {
      const store = new DetailStore<Rollout>(() => readOne(rolloutId)) as DetailStore<Rollout> & {
        close(): void;
      };
      let stores = open.get(rolloutId);
      if (!stores) open.set(rolloutId, (stores = new Set()));
      stores.add(store);
      store.close = () => {
        const set = open.get(rolloutId);
        set?.delete(store);
        if (set?.size === 0) open.delete(rolloutId);
      };
      return store;
    },
    async steer(rolloutId, action) {
      try {
        const input = { tenantId, rolloutId };
        const answer =
          action === 'pause'
            ? await client.call('rollouts.pause', input)
            : action === 'resume'
              ? await client.call('rollouts.resume', input)
              : await client.call('rollouts.abort', input);
        return show(answer);
      } catch (error) {
        // Refused because it changed meanwhile (INVALID_STATE) or is gone: show what it is now.
        if (!isGone(error)) void reread(rolloutId).catch(() => {});
        else list.remove(rolloutId);
        throw error;
      }
    },
    actionOf: (rolloutId, action) => describeAction('rollouts', action, rolloutId),
  };
}
