/**
 * last_used_at (API keys) and last_seen_at (sessions) are written in batches, off the request path:
 * authenticating only notes the time, and a timer writes what was noted every few seconds.
 */
import type { Kysely } from 'kysely';
import type { TokenEntry } from './cache.js';
import type { IamDatabase } from './schema.js';

const FLUSH_EVERY_MS = 5_000;

export class LastUsed {
  private readonly keys = new Map<string, Date>();
  private readonly sessions = new Map<string, Date>();
  private flushing: Promise<void> | null = null;
  private readonly timer: ReturnType<typeof setInterval>;

  constructor(
    private readonly db: Kysely<IamDatabase>,
    private readonly clock: () => Date,
  ) {
    this.timer = setInterval(() => void this.flush(), FLUSH_EVERY_MS);
    this.timer.unref?.();
  }

  /** Notes that the credential of a cache entry was used now. */
  touch(entry: TokenEntry): void {
    if (entry.credentialKind === 'api-key') this.keys.set(entry.credentialId, this.clock());
    else this.sessions.set(entry.credentialId, this.clock());
  }

  async flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    if (this.keys.size === 0 && this.sessions.size === 0) return;
    const keysNow = [...this.keys];
    const sessionsNow = [...this.sessions];
    this.keys.clear();
    this.sessions.clear();
    this.flushing = (async () => {
      try {
        for (const [keyId, at] of keysNow) {
          await this.db
            .updateTable('iam.api_keys')
            .set({ last_used_at: at })
            .where('id', '=', keyId)
            .execute();
        }
        for (const [sessionId, at] of sessionsNow) {
          await this.db
            .updateTable('iam.sessions')
            .set({ last_seen_at: at })
            .where('id', '=', sessionId)
            .execute();
        }
      } catch {
        // Last-used times are advisory; a failed batch is dropped rather than retried forever.
      } finally {
        this.flushing = null;
      }
    })();
    return this.flushing;
  }

  /** Stops the timer and writes what is pending. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
