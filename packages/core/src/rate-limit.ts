/**
 * A token bucket per identity, in memory: each replica limits what it serves. Cheap enough to sit
 * on every call (one map lookup and a little arithmetic). One limiter serves a deployment's
 * compute routes and its embedded IAM's, so an identity has one budget across both.
 */
import { ComputeError } from './errors.js';

export interface RateLimitOptions {
  perSecond: number;
  burst: number;
}

interface Bucket {
  tokens: number;
  updatedAt: number;
}

export class RateLimiter {
  readonly #buckets = new Map<string, Bucket>();
  readonly #options: RateLimitOptions;
  readonly #now: () => number;

  constructor(options: RateLimitOptions, now: () => number = Date.now) {
    this.#options = options;
    this.#now = now;
  }

  /** Takes one token for `key`; returns 0 when allowed, else the milliseconds until one is free. */
  take(key: string): number {
    const now = this.#now();
    const { perSecond, burst } = this.#options;
    const bucket = this.#buckets.get(key) ?? { tokens: burst, updatedAt: now };
    bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.updatedAt) / 1000) * perSecond);
    bucket.updatedAt = now;
    this.#buckets.set(key, bucket);
    if (this.#buckets.size > 100_000) this.#evictFull(now);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - bucket.tokens) / perSecond) * 1000);
  }

  // Buckets that have refilled completely carry no information; drop them to bound memory.
  #evictFull(now: number): void {
    for (const [key, bucket] of this.#buckets) {
      if (
        bucket.tokens + ((now - bucket.updatedAt) / 1000) * this.#options.perSecond >=
        this.#options.burst
      ) {
        this.#buckets.delete(key);
      }
    }
  }
}

/** The refusal of a call over the limit, with the wait in `retryAfterMs` (and Retry-After). */
export function rateLimited(waitMs: number): ComputeError {
  return new ComputeError('RATE_LIMITED', 'too many requests; slow down', {
    details: { retryAfterMs: waitMs },
    hint: `Wait ${Math.ceil(waitMs / 1000)} s before the next call; the limit is per identity.`,
  });
}
