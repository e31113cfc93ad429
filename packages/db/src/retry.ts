/**
 * A transaction PostgreSQL aborted only because of how it met others: chosen as a deadlock's
 * victim (40P01) or refused as a serialization failure (40001). Nothing of it was kept, and the
 * same work run again can succeed, so the caller runs it again instead of answering INTERNAL.
 */
const TRANSIENT_CODES: ReadonlySet<string> = new Set(['40P01', '40001']);

export function isTransientConflict(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && TRANSIENT_CODES.has(code);
}

/**
 * Runs `work` (one whole transaction, begun inside it) up to `attempts` times while it fails with
 * a transient conflict, waiting a few random milliseconds between tries so the transactions that
 * met do not meet again in the same order. Any other failure, and the last one, is thrown.
 */
export async function retryTransient<T>(work: (attempt: number) => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work(attempt);
    } catch (error) {
      if (attempt >= attempts || !isTransientConflict(error)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 20 * attempt));
    }
  }
}
