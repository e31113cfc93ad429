/**
 * The live event hub of one process (docs/live-events.md). Streams register here; one reader per
 * tenant reads the outbox with events.list's own query (listEvents: only what is below the
 * snapshot's xmin, so an event that commits late with a lower position is still ahead of every
 * cursor) and fans each page out to that tenant's streams, filtering types in memory. Streams at
 * the same cursor share one query, so a thousand watchers of a tenant cost one read per wake.
 *
 * Wakes: the outbox trigger's NOTIFY on `better_compute_events` (payload: the tenant), over one
 * LISTEN connection per process (PGlite: the engine's own notifications); a slow poll in case that
 * connection dropped; and a quick second look while committed events wait behind an older open
 * transaction. IAM's change feed (`better_iam_changes`) and a timer re-authorize every stream.
 *
 * The trigger notifies only for tenants in compute.live_watches (a NOTIFY serialises commits, so
 * writes nobody watches skip it): a tenant's first stream in this process puts the tenant there,
 * and the hub renews the row while the tenant has streams here (docs/decisions/reserve-notify.md).
 */
import { type Database, listenOn, type Listening } from '@better-compute/db';
import { type Kysely, sql } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import { EVENTS_CHANNEL, type EventRecord, listEvents, markWatched } from '../modules/events/index.js';
import { SETTLED_HORIZON } from '../db/settled.js';

/** IAM's change feed channel (better-iam's CHANGE_CHANNEL). */
const IAM_CHANGES_CHANNEL = 'better_iam_changes';

/** One open stream, as the hub sees it. */
export interface LiveStream {
  readonly tenantId: string;
  /** The position (list form) of the last event read for this stream; null before the first read. */
  cursor: string | null;
  /** Gets every event after the cursor, in order; filters and writes what it wants. */
  deliver(events: readonly EventRecord[]): void;
  /** Asks IAM again whether the stream may stay open; closes it when not. */
  reauthorize(): Promise<void>;
  /** Ends the stream (the hub is closing). */
  end(): void;
}

export interface LiveHubOptions {
  db: () => Kysely<ComputeTables>;
  database: Database;
  /** Milliseconds between safety-net reads of every tenant with streams (default 5 s). */
  pollMs?: number | undefined;
  /** Milliseconds between re-authorizations of every stream (default 30 s). */
  reauthorizeMs?: number | undefined;
  /** Milliseconds after which a watch row this process keeps is renewed (default 30 s; it lasts 120 s). */
  watchRenewMs?: number | undefined;
  /** Whether to LISTEN for IAM's change feed (off when the deployment brings its own IAM elsewhere). */
  iamFeed?: boolean | undefined;
  log: (message: string, error?: unknown) => void;
}

const PAGE = 500;
/** The quick second looks while events wait behind an open transaction: 5 ms, doubling to 50 ms. */
const HELD_FIRST_MS = 5;
const HELD_MAX_MS = 50;
/** How long a watch row stays current unrenewed, and how often a process renews the ones it keeps. */
const WATCH_SECONDS = 120;
const WATCH_RENEW_MS = 30_000;
/** How long a new watch waits for the transactions that may have missed it (see #watch). */
const WATCH_SETTLE_MS = 10_000;

class TenantReader {
  readonly streams = new Set<LiveStream>();
  /** The tenant's row in compute.live_watches, written (or renewed) at this time; see LiveHub.#watch. */
  watched: Promise<void> | null = null;
  watchedAt = 0;
  #running = false;
  #again = false;
  #heldMs = 0;
  #heldTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(
    readonly tenantId: string,
    private readonly hub: LiveHub,
  ) {}

  wake(): void {
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = true;
    void this.#run();
  }

  async #run(): Promise<void> {
    try {
      do {
        this.#again = false;
        const held = await this.#pass();
        if (held) this.#lookSoon();
        else this.#heldMs = 0;
      } while (this.#again && this.streams.size > 0);
    } catch (error) {
      this.hub.log(`reading the outbox of ${this.tenantId} failed; the next wake retries`, error);
      this.#lookSoon();
    } finally {
      this.#running = false;
    }
  }

  #lookSoon(): void {
    if (this.#heldTimer || this.streams.size === 0) return;
    this.#heldMs = this.#heldMs === 0 ? HELD_FIRST_MS : Math.min(this.#heldMs * 2, HELD_MAX_MS);
    this.#heldTimer = setTimeout(() => {
      this.#heldTimer = null;
      this.wake();
    }, this.#heldMs);
    this.#heldTimer.unref?.();
  }

  /** One read up to the head for every group of streams at one cursor; true when events are held back. */
  async #pass(): Promise<boolean> {
    const groups = new Map<string, LiveStream[]>();
    for (const stream of this.streams) {
      if (stream.cursor === null) continue;
      const group = groups.get(stream.cursor);
      if (group) group.push(stream);
      else groups.set(stream.cursor, [stream]);
    }
    let held = false;
    for (const [start, group] of groups) {
      let cursor = start;
      for (;;) {
        const page = await listEvents(this.hub.db(), {
          tenantId: this.tenantId,
          limit: PAGE,
          cursor,
          reportHeld: true,
        });
        held ||= page.held === true;
        const last = page.items.at(-1);
        if (!last) break;
        for (const stream of group) {
          // A stream that closed, or was moved on by another group's read, is left alone.
          if (!this.streams.has(stream) || stream.cursor !== cursor) continue;
          stream.cursor = last.position;
          stream.deliver(page.items);
        }
        cursor = last.position;
        if (!page.nextCursor) break;
      }
    }
    return held;
  }

  stop(): void {
    if (this.#heldTimer) clearTimeout(this.#heldTimer);
    this.#heldTimer = null;
  }
}

export class LiveHub {
  readonly db: () => Kysely<ComputeTables>;
  readonly log: LiveHubOptions['log'];
  readonly #options: LiveHubOptions;
  readonly #readers = new Map<string, TenantReader>();
  #listening: Promise<Listening | null> | null = null;
  #poll: ReturnType<typeof setInterval> | null = null;
  #renew: ReturnType<typeof setInterval> | null = null;
  #recheck: ReturnType<typeof setInterval> | null = null;
  #closed = false;

  constructor(options: LiveHubOptions) {
    this.#options = options;
    this.db = options.db;
    this.log = options.log;
  }

  /** How many streams are open in this process. */
  get size(): number {
    let size = 0;
    for (const reader of this.#readers.values()) size += reader.streams.size;
    return size;
  }

  /** Starts LISTEN and the timers on the first stream; resolves once notifications arrive. */
  async #start(): Promise<void> {
    if (this.#listening) {
      await this.#listening;
      return;
    }
    const channels = [EVENTS_CHANNEL, ...(this.#options.iamFeed === false ? [] : [IAM_CHANGES_CHANNEL])];
    this.#listening = listenOn(this.#options.database, channels, {
      notification: (channel, payload) => {
        if (channel === EVENTS_CHANNEL) this.#readers.get(payload)?.wake();
        else this.#iamChanged();
      },
      // After a reconnection anything may have been missed: read and re-decide everything.
      connected: () => {
        this.wakeAll();
        this.#iamChanged();
      },
    }).catch((error: unknown) => {
      this.log('cannot LISTEN for new events; streams rely on polling', error);
      return null;
    });
    this.#poll = setInterval(() => this.wakeAll(), this.#options.pollMs ?? 5000);
    this.#poll.unref?.();
    this.#renew = setInterval(() => this.#renewWatches(), this.#renewMs / 3);
    this.#renew.unref?.();
    this.#recheck = setInterval(() => this.reauthorizeAll(), this.#options.reauthorizeMs ?? 30_000);
    this.#recheck.unref?.();
    await this.#listening;
  }

  /**
   * IAM changed somewhere: re-decide every stream now, and once more shortly after, in case this
   * notification overtook the one that clears IAM's own cache in this process.
   */
  #iamChanged(): void {
    this.reauthorizeAll();
    setTimeout(() => this.reauthorizeAll(), 250).unref?.();
  }

  reauthorizeAll(): void {
    for (const reader of this.#readers.values())
      for (const stream of reader.streams) void stream.reauthorize();
  }

  wakeAll(): void {
    for (const reader of this.#readers.values()) reader.wake();
  }

  /** Registers a stream (its cursor set) and reads what is already past its cursor. */
  async add(stream: LiveStream): Promise<void> {
    if (this.#closed) {
      stream.end();
      return;
    }
    await this.#start();
    for (;;) {
      let reader = this.#readers.get(stream.tenantId);
      if (!reader) {
        this.#readers.set(stream.tenantId, (reader = new TenantReader(stream.tenantId, this)));
        reader.watchedAt = Date.now();
        reader.watched = this.#watch(reader);
      }
      await reader.watched;
      if (this.#closed) {
        stream.end();
        return;
      }
      // A reader dropped meanwhile (its last stream went while this one waited) is made again.
      if (this.#readers.get(stream.tenantId) !== reader) continue;
      reader.streams.add(stream);
      reader.wake();
      return;
    }
  }

  /**
   * Puts the tenant in compute.live_watches for WATCH_SECONDS, so the outbox trigger notifies for
   * it. A writer whose trigger ran before this row committed did not notify; it held a transaction
   * id by then (its events were written), so it is either committed before the snapshot taken next,
   * and read by the stream's first read, or still running in it: the reader looks again once every
   * transaction running at that snapshot has ended. Failures are logged; the poll still delivers.
   */
  async #watch(reader: TenantReader): Promise<void> {
    try {
      await markWatched(this.db(), reader.tenantId, WATCH_SECONDS);
      const { rows } = await sql<{
        xmax: string;
      }>`select pg_snapshot_xmax(pg_current_snapshot())::text as xmax`.execute(this.db());
      void this.#settle(reader, rows[0]!.xmax);
    } catch (error) {
      this.log(`cannot mark ${reader.tenantId} as watched; its streams rely on polling`, error);
    }
  }

  /** Wakes the reader once no transaction older than `xmax` runs (or after WATCH_SETTLE_MS). */
  async #settle(reader: TenantReader, xmax: string): Promise<void> {
    const deadline = Date.now() + WATCH_SETTLE_MS;
    let waitMs = HELD_FIRST_MS;
    try {
      while (!this.#closed && Date.now() < deadline) {
        const { rows } = await sql<{
          settled: boolean;
        }>`select ${SETTLED_HORIZON} >= ${xmax}::xid8 as settled`.execute(this.db());
        if (rows[0]?.settled) break;
        await new Promise((resolve) => setTimeout(resolve, waitMs));
        waitMs = Math.min(waitMs * 2, HELD_MAX_MS);
      }
    } catch (error) {
      this.log(`waiting for writers older than the watch of ${reader.tenantId} failed`, error);
    }
    reader.wake();
  }

  get #renewMs(): number {
    return Math.min(this.#options.watchRenewMs ?? WATCH_RENEW_MS, WATCH_RENEW_MS);
  }

  /** Renews this process's watch rows, each once it is #renewMs old, long before they lapse. */
  #renewWatches(): void {
    const now = Date.now();
    for (const reader of this.#readers.values()) {
      if (now - reader.watchedAt < this.#renewMs) continue;
      reader.watchedAt = now;
      markWatched(this.db(), reader.tenantId, WATCH_SECONDS).catch((error: unknown) =>
        this.log(`cannot renew the watch of ${reader.tenantId}`, error),
      );
    }
  }

  remove(stream: LiveStream): void {
    const reader = this.#readers.get(stream.tenantId);
    if (!reader) return;
    reader.streams.delete(stream);
    if (reader.streams.size === 0) {
      reader.stop();
      this.#readers.delete(stream.tenantId);
    }
  }

  /** Wakes one tenant's reader (a write in this process that bypassed the outbox trigger, or a test). */
  wake(tenantId: string): void {
    this.#readers.get(tenantId)?.wake();
  }

  /** Ends every stream and stops listening. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#poll) clearInterval(this.#poll);
    if (this.#renew) clearInterval(this.#renew);
    if (this.#recheck) clearInterval(this.#recheck);
    for (const reader of [...this.#readers.values()]) {
      reader.stop();
      for (const stream of [...reader.streams]) stream.end();
    }
    this.#readers.clear();
    const listening = await this.#listening;
    await listening?.close();
  }
}
