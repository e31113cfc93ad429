/**
 * LISTEN on a database, for components that must learn of commits in other transactions (the live
 * event stream, IAM's change feed). On PostgreSQL it is one dedicated connection outside the pool,
 * reconnected after a failure; on PGlite the engine's own notifications, with the LISTEN run on its
 * one session between transactions. `connected` runs after every (re)connection: whatever was sent
 * while nobody listened is lost, so the caller should catch up then. This is the project's only
 * LISTEN client.
 */
import { sql } from 'kysely';
import { type Database, pgliteClients } from './database.js';

export interface ListenHandlers {
  notification(channel: string, payload: string): void;
  /** After the LISTEN is in place, the first time and after every reconnection. */
  connected?(): void;
  /** When the connection is lost (a reconnection is scheduled): notifications may be missed. */
  disconnected?(): void;
}

export interface Listening {
  /** Whether notifications are known to arrive now. */
  readonly live: boolean;
  close(): Promise<void>;
}

interface ListenClient {
  on(event: 'notification', listener: (message: { channel: string; payload?: string }) => void): unknown;
  on(event: 'error' | 'end', listener: () => void): unknown;
  connect(): Promise<unknown>;
  query(text: string): Promise<unknown>;
  end(): Promise<void>;
}

const CHANNEL = /^[a-z_][a-z0-9_]{0,62}$/;

export async function listenOn(
  database: Database,
  channels: readonly string[],
  handlers: ListenHandlers,
  retryMs = 1000,
): Promise<Listening> {
  for (const channel of channels) if (!CHANNEL.test(channel)) throw new Error(`bad channel ${channel}`);
  const listens = channels.map((channel) => `listen ${channel}`).join('; ');
  const engine = pgliteClients.get(database.db);
  if (database.kind === 'pglite' && engine) {
    const wanted = new Set(channels);
    const stop = engine.onNotification((channel, payload) => {
      if (wanted.has(channel)) handlers.notification(channel, payload);
    });
    // Through the dialect, so the LISTEN waits for any open transaction instead of joining it.
    await database.db.connection().execute((connection) => sql.raw(listens).execute(connection));
    handlers.connected?.();
    return {
      live: true,
      async close() {
        stop();
      },
    };
  }
  if (!database.url) return { live: false, close: async () => {} };
  return listenAt(database.url, channels, handlers, retryMs);
}

/** LISTEN on the PostgreSQL server at `url`, on a connection of its own (see above). */
export async function listenAt(
  url: string,
  channels: readonly string[],
  handlers: ListenHandlers,
  retryMs = 1000,
): Promise<Listening> {
  for (const channel of channels) if (!CHANNEL.test(channel)) throw new Error(`bad channel ${channel}`);
  const listens = channels.map((channel) => `listen ${channel}`).join('; ');
  let client: ListenClient | null = null;
  let live = false;
  let closed = false;
  let retry: ReturnType<typeof setTimeout> | null = null;
  const { default: pg } = await import('pg');

  const schedule = () => {
    if (closed || retry) return;
    retry = setTimeout(() => {
      retry = null;
      void connect();
    }, retryMs);
    retry.unref?.();
  };
  const down = (which: ListenClient) => {
    if (client !== which) return;
    client = null;
    live = false;
    which.end().catch(() => {});
    handlers.disconnected?.();
    schedule();
  };
  async function connect(): Promise<void> {
    const next: ListenClient = new pg.Client({ connectionString: url });
    next.on('notification', (message) => handlers.notification(message.channel, message.payload ?? ''));
    next.on('error', () => down(next));
    next.on('end', () => down(next));
    client = next;
    try {
      await next.connect();
      await next.query(listens);
      if (closed) return void (await next.end().catch(() => {}));
      live = true;
      handlers.connected?.();
    } catch {
      down(next);
    }
  }
  await connect();
  return {
    get live() {
      return live;
    },
    async close() {
      closed = true;
      if (retry) clearTimeout(retry);
      const last = client;
      client = null;
      live = false;
      await last?.end().catch(() => {});
    },
  };
}
