/**
 * A live console in one call: the stores a console's pages read (reservations, nodes, pools,
 * capacity, recent events), kept current by the event stream. Each event is routed by its subject:
 * `reservation/…` and `node/…` (and any kind a later page registers with `track`, `instance/…`
 * among them) re-read that one item, `pool/…` refreshes the pools, and reservation, pool and node
 * events other than `node.status` refresh the capacity summary, debounced by 250 ms. Only stores a
 * page has loaded are touched. While the stream is down, every loaded store is re-read every 20 s
 * instead, and only while the page is visible.
 */
import type { CallOutput, ComputeClient, WatchedEvent } from '@better-compute/client';
import { DetailStore, ListStore } from './stores.js';
import { ValueStore } from './subscribable.js';
import { watchEvents, type EventWatch, type WatchEventsState } from './watch-events.js';
import type { Permissions } from './permissions.js';

export type Reservation = CallOutput<'reservations.get'>;
export type ComputeNode = CallOutput<'nodes.get'>;
export type Pool = CallOutput<'pools.get'>;
export type CapacityPool = CallOutput<'capacity.get'>['items'][number];
export type ComputeEvent = WatchedEvent;

/** A store events can refresh: a list (re-read one item) or anything with `refresh`. */
export interface TrackedStore {
  readonly loaded: boolean;
  refresh(): Promise<void>;
  /**
   * Re-reads one item; `event` is the one that named it, for a store that keeps only some items (a
   * node's commands) and decides from the event's data whether an item it does not hold is its.
   */
  refreshItem?(id: string, event?: ComputeEvent): Promise<void>;
}

export interface LiveConsole {
  readonly tenantId: string;
  readonly reservations: ListStore<Reservation>;
  readonly nodes: ListStore<ComputeNode>;
  readonly pools: ListStore<Pool>;
  readonly capacity: DetailStore<CapacityPool[]>;
  /** The events the stream delivered since the console started, newest first (at most `keepEvents`). */
  readonly events: ValueStore<readonly ComputeEvent[]>;
  /** The stream's state, for the "live" badge. */
  readonly connection: ValueStore<WatchEventsState>;
  readonly permissions: Permissions | undefined;
  /**
   * Keeps a store current for events whose subject is `subjectType` (`instance`): a list re-reads
   * the one item, any other store refreshes. Returns the function that stops tracking it.
   */
  track(subjectType: string, store: TrackedStore): () => void;
  /** Applies one event (what the stream does for each). */
  applyEvent(event: ComputeEvent): void;
  /** Re-reads every store a page has loaded. */
  refreshLoaded(): Promise<void>;
  stop(): void;
}

export interface LiveConsoleOptions {
  tenantId: string;
  /** Where the host serves the stream (the console: `/api/compute/watch`). */
  watchUrl: string;
  headers?: Record<string, string> | (() => Record<string, string>) | undefined;
  permissions?: Permissions | undefined;
  fetch?: ((request: Request) => Promise<Response>) | undefined;
  /** The refresh period while the stream is down; default 20 000 ms. */
  pollMs?: number | undefined;
  /** Whether the page is visible; default `document.visibilityState === 'visible'` (always true without a document). */
  isVisible?: (() => boolean) | undefined;
  /** The capacity refresh's debounce; default 250 ms. */
  capacityDebounceMs?: number | undefined;
  /** How many recent events `events` keeps; default 200. */
  keepEvents?: number | undefined;
  /** Page size of the lists; default 50. */
  pageSize?: number | undefined;
  initialBackoffMs?: number | undefined;
  maxBackoffMs?: number | undefined;
}

/** Event types after which cached permission answers may be wrong. */
const PERMISSION_EVENT = /^(iam\.|binding\.|delegation\.|agent\.|project\.members\.)/;
const CAPACITY_SUBJECTS = new Set(['reservation', 'pool', 'node']);

function documentVisible(): boolean {
  const doc = (globalThis as { document?: { visibilityState?: string } }).document;
  return !doc || doc.visibilityState === undefined || doc.visibilityState === 'visible';
}

/** Routes one event to the stores it changes (see the file's comment). */
export function applyEvent(
  event: ComputeEvent,
  targets: {
    tracked: ReadonlyMap<string, Set<TrackedStore>>;
    pools?: TrackedStore | undefined;
    refreshCapacity?: (() => void) | undefined;
    permissions?: Permissions | undefined;
  },
): void {
  if (targets.permissions && PERMISSION_EVENT.test(event.type)) targets.permissions.clear();
  const { type: subjectType, id } = event.subject;
  if (subjectType === 'pool') {
    if (targets.pools?.loaded) void targets.pools.refresh();
  }
  for (const store of targets.tracked.get(subjectType) ?? []) {
    if (!store.loaded) continue;
    if (id && store.refreshItem) void store.refreshItem(id, event);
    else void store.refresh();
  }
  if (CAPACITY_SUBJECTS.has(subjectType) && event.type !== 'node.status') targets.refreshCapacity?.();
}

/**
 * Starts the stores and the stream.
 *
 * @example
 * const live = await startLiveConsole(client, { tenantId, watchUrl: '/api/compute/watch' });
 * live.reservations.subscribe(() => render(live.reservations.get()));
 */
export async function startLiveConsole(
  client: ComputeClient,
  options: LiveConsoleOptions,
): Promise<LiveConsole> {
  const { tenantId } = options;
  const limit = options.pageSize ?? 50;
  const page = (cursor: string | undefined) => ({ tenantId, limit, ...(cursor ? { cursor } : {}) });
  const reservations = new ListStore<Reservation>({
    load: (cursor) => client.call('reservations.list', page(cursor)),
    readOne: (reservationId) => client.call('reservations.get', { tenantId, reservationId }),
  });
  const nodes = new ListStore<ComputeNode>({
    load: (cursor) => client.call('nodes.list', page(cursor)),
    readOne: (nodeId) => client.call('nodes.get', { tenantId, nodeId }),
    insertAt: 'end',
  });
  const pools = new ListStore<Pool>({
    load: (cursor) => client.call('pools.list', page(cursor)),
    readOne: (poolId) => client.call('pools.get', { tenantId, poolId }),
    insertAt: 'end',
  });
  const capacity = new DetailStore<CapacityPool[]>(async () => {
    return (await client.call('capacity.get', { tenantId })).items;
  });
  const events = new ValueStore<readonly ComputeEvent[]>([]);
  const connection = new ValueStore<WatchEventsState>({ status: 'connecting', attempt: 0 });
  const tracked = new Map<string, Set<TrackedStore>>();
  const track = (subjectType: string, store: TrackedStore) => {
    let set = tracked.get(subjectType);
    if (!set) tracked.set(subjectType, (set = new Set()));
    set.add(store);
    return () => void set.delete(store);
  };
  track('reservation', reservations);
  track('node', nodes);

  const debounceMs = options.capacityDebounceMs ?? 250;
  let capacityTimer: ReturnType<typeof setTimeout> | undefined;
  const refreshCapacity = () => {
    if (!capacity.loaded) return;
    clearTimeout(capacityTimer);
    capacityTimer = setTimeout(() => void capacity.refresh(), debounceMs);
  };
  const keep = options.keepEvents ?? 200;
  const apply = (event: ComputeEvent) => {
    events.set([event, ...events.get()].slice(0, keep));
    applyEvent(event, { tracked, pools, refreshCapacity, permissions: options.permissions });
  };

  const allStores = (): TrackedStore[] => {
    const stores = new Set<TrackedStore>([reservations, nodes, pools, capacity]);
    for (const set of tracked.values()) for (const store of set) stores.add(store);
    return [...stores];
  };
  const refreshLoaded = async () => {
    await Promise.all(
      allStores()
        .filter((store) => store.loaded)
        .map((store) => store.refresh()),
    );
  };

  const isVisible = options.isVisible ?? documentVisible;
  const pollMs = options.pollMs ?? 20_000;
  // While the stream is down the pages still move, slower: every pollMs, and only when someone looks.
  const poll = setInterval(() => {
    if (connection.get().status !== 'open' && isVisible()) void refreshLoaded();
  }, pollMs);
  (poll as { unref?: () => void }).unref?.();

  // onStatus reads `watch` only for `open`, which comes after the first await, once it is assigned.
  const watch: EventWatch = watchEvents({
    url: options.watchUrl,
    headers: options.headers,
    fetch: options.fetch,
    initialBackoffMs: options.initialBackoffMs,
    maxBackoffMs: options.maxBackoffMs,
    onEvent: apply,
    onStatus: (state) => {
      connection.set(state);
      // A stream opened without Last-Event-ID starts from now: what changed between the stores'
      // first read (or the last event) and this moment is read again, so nothing is missed.
      if (state.status === 'open' && !watch.lastEventId()) void refreshLoaded();
    },
  });

  return {
    tenantId,
    reservations,
    nodes,
    pools,
    capacity,
    events,
    connection,
    permissions: options.permissions,
    track,
    applyEvent: apply,
    refreshLoaded,
    stop() {
      watch.stop();
      clearInterval(poll);
      clearTimeout(capacityTimer);
    },
  };
}
