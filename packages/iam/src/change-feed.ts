/**
 * Carries IAM changes to every cache that may hold what they touch: caches over the same database
 * object in this process directly, other processes through PostgreSQL LISTEN/NOTIFY on
 * `better_iam_changes`. The notification is sent inside the change's transaction, so PostgreSQL
 * delivers it exactly when the change commits, and never for a change that rolled back.
 */
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { type DatabaseKind, type Listening, listenAt } from '@better-compute/db';
import {
  type AuthCache,
  CHANGE_CHANNEL,
  formatChangePayload,
  type IamChange,
  parseChangePayload,
} from './cache.js';
import type { IamDatabase } from './schema.js';

/** Caches sharing one database object in this process. */
const peers = new WeakMap<object, Set<AuthCache>>();

export interface ChangeFeedOptions {
  kind: DatabaseKind;
  /** The database object; caches over the same one in this process share changes directly. */
  key: object;
  /** A PostgreSQL URL for the LISTEN connection; without one other processes are not told. */
  listenUrl: string | undefined;
  cache: AuthCache;
}

export class ChangeFeed {
  readonly #origin = randomUUID();
  readonly #options: ChangeFeedOptions;
  readonly #waiters = new Map<string, () => void>();
  #listening: Listening | null = null;
  #live = false;
  #closed = false;
  #starting: Promise<void> | null = null;

  constructor(options: ChangeFeedOptions) {
    this.#options = options;
    let set = peers.get(options.key);
    if (!set) peers.set(options.key, (set = new Set()));
    set.add(options.cache);
  }

  /** Whether every change that commits is known to reach this cache (PGlite: one process). */
  get live(): boolean {
    return this.#options.kind === 'pglite' || this.#live;
  }

  /** Starts listening (PostgreSQL with a URL); resolves once the LISTEN is in place or failed. */
  start(): Promise<void> {
    const url = this.#options.listenUrl;
    if (this.#options.kind !== 'postgres' || !url || this.#closed || this.#listening)
      return Promise.resolve();
    this.#starting ??= listenAt(url, [CHANGE_CHANNEL], {
      notification: (_channel, payload) => this.#received(payload),
      connected: () => {
        // Whatever changed while nobody listened is unknown: start from an empty cache.
        this.#options.cache.apply({ type: 'all' });
        this.#live = true;
      },
      disconnected: () => {
        this.#live = false;
        this.#options.cache.apply({ type: 'all' });
      },
    }).then(async (listening) => {
      if (this.#closed) await listening.close();
      else this.#listening = listening;
    });
    return this.#starting;
  }

  #received(payload: string): void {
    const parsed = parseChangePayload(payload);
    if (parsed === null) {
      this.#apply([{ type: 'all' }]);
      return;
    }
    if (parsed.origin === this.#origin) {
      this.#waiters.get(parsed.nonce)?.();
      return;
    }
    this.#apply(parsed.changes);
  }

  #apply(changes: IamChange[]): void {
    for (const cache of peers.get(this.#options.key) ?? [this.#options.cache]) {
      for (const change of changes) cache.apply(change);
    }
  }

  /** Inside the change's transaction: queues the notification PostgreSQL sends at commit. */
  async notify(trx: Kysely<IamDatabase>, changes: IamChange[]): Promise<string> {
    const nonce = randomUUID();
    const payload = formatChangePayload({ origin: this.#origin, nonce, changes });
    await sql`select pg_notify(${CHANGE_CHANNEL}, ${payload})`.execute(trx);
    return nonce;
  }

  /**
   * After the commit: drops the entries here and in this process's peers at once, then waits
   * (briefly) for our own notification to come back, by which time PostgreSQL has handed it to
   * every other listener too.
   */
  async committed(changes: IamChange[], nonce: string): Promise<void> {
    this.#apply(changes);
    if (!this.#live) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, 250);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#waiters.set(nonce, done);
    }).finally(() => this.#waiters.delete(nonce));
  }

  async close(): Promise<void> {
    this.#closed = true;
    peers.get(this.#options.key)?.delete(this.#options.cache);
    await this.#starting;
    const listening = this.#listening;
    this.#listening = null;
    this.#live = false;
    await listening?.close();
  }
}
