/**
 * Carries IAM changes to every cache that may hold what they touch: caches over the same database
 * object in this process directly, other processes through PostgreSQL LISTEN/NOTIFY on
 * `better_iam_changes`. The notification is sent inside the change's transaction, so PostgreSQL
 * delivers it exactly when the change commits, and never for a change that rolled back.
 */
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { DatabaseKind } from '@better-compute/db';
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

interface ListenClient {
  on(event: 'notification', listener: (message: { channel: string; payload?: string }) => void): unknown;
  on(event: 'error' | 'end', listener: () => void): unknown;
  connect(): Promise<unknown>;
  query(text: string): Promise<unknown>;
  end(): Promise<void>;
}

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
  #client: ListenClient | null = null;
  #live = false;
  #closed = false;
  #starting: Promise<void> | null = null;
  #retry: ReturnType<typeof setTimeout> | null = null;

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
    if (this.#options.kind !== 'postgres' || !this.#options.listenUrl || this.#closed)
      return Promise.resolve();
    this.#starting ??= this.#connect().finally(() => (this.#starting = null));
    return this.#starting;
  }

  async #connect(): Promise<void> {
    try {
      const { default: pg } = await import('pg');
      const client: ListenClient = new pg.Client({ connectionString: this.#options.listenUrl });
      client.on('notification', (message) => {
        if (message.channel !== CHANGE_CHANNEL) return;
        const parsed = parseChangePayload(message.payload);
        if (parsed === null) {
          this.#apply([{ type: 'all' }]);
          return;
        }
        if (parsed.origin === this.#origin) {
          this.#waiters.get(parsed.nonce)?.();
          return;
        }
        this.#apply(parsed.changes);
      });
      client.on('error', () => this.#down(client));
      client.on('end', () => this.#down(client));
      await client.connect();
      await client.query(`listen ${CHANGE_CHANNEL}`);
      if (this.#closed) {
        await client.end();
        return;
      }
      this.#client = client;
      // Whatever changed while nobody listened is unknown: start from an empty cache.
      this.#options.cache.apply({ type: 'all' });
      this.#live = true;
    } catch {
      this.#scheduleRetry();
    }
  }

  #down(client: ListenClient): void {
    if (this.#client !== client) return;
    this.#client = null;
    this.#live = false;
    this.#options.cache.apply({ type: 'all' });
    client.end().catch(() => {});
    this.#scheduleRetry();
  }

  #scheduleRetry(): void {
    if (this.#closed || this.#retry) return;
    this.#retry = setTimeout(() => {
      this.#retry = null;
      void this.start();
    }, 1000);
    this.#retry.unref?.();
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
    if (!this.#live || this.#client === null) return;
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
    if (this.#retry) clearTimeout(this.#retry);
    peers.get(this.#options.key)?.delete(this.#options.cache);
    await this.#starting;
    const client = this.#client;
    this.#client = null;
    this.#live = false;
    await client?.end().catch(() => {});
  }
}
