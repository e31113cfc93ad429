/**
 * Token buckets per identity and per tenant, in memory: each replica limits what it serves. A call
 * spends its method's cost from its identity's bucket and from its tenant's (both, or neither);
 * reads cost less than changes, and a few heavy methods more (docs/rate-limits.md). Cheap enough to
 * sit on every call (two map lookups and a little arithmetic). One limiter serves a deployment's
 * compute routes and its embedded IAM's, so an identity has one budget across both.
 */
import { ComputeError } from './errors.js';

export interface BucketOptions {
  /** Tokens added per second. */
  perSecond: number;
  /** Tokens the bucket holds at most (and starts with). */
  burst: number;
}

export interface RateLimitOptions extends BucketOptions {
  /** Each tenant's bucket, shared by all of its identities; `false` for none. */
  tenant?: BucketOptions | false | undefined;
  /** A call's cost by method (`group.name`), over the defaults (DEFAULT_METHOD_COSTS, then by kind). */
  costs?: Readonly<Record<string, number>> | undefined;
}

/** What a method costs unless the configuration says otherwise: a read, a change. */
export const READ_COST = 0.5;
export const CHANGE_COST = 1;
/** Methods that read or change much more than one resource. */
export const DEFAULT_METHOD_COSTS: Readonly<Record<string, number>> = {
  'capacity.get': 2,
  'capacity.preview': 2,
  'usage.list': 2,
  'usage.export': 5,
  'nodes.retire': 5,
  'nodes.delete': 5,
};

/**
 * The defaults: an identity may spend 150 tokens a second (75 reserve-and-release pairs, or 300
 * reads) with bursts of 300; a tenant, all its identities together, 600 a second with bursts of 1,200.
 */
export const DEFAULT_RATE_LIMIT: Required<Omit<RateLimitOptions, 'costs'>> & {
  costs: Record<string, number>;
} = {
  perSecond: 150,
  burst: 300,
  tenant: { perSecond: 600, burst: 1200 },
  costs: {},
};

interface Bucket {
  tokens: number;
  updatedAt: number;
}

/** Which limit refused a call, and how long until it has room for it. */
export interface Refusal {
  waitMs: number;
  limit: 'identity' | 'tenant';
}

/** One kind of bucket (identity or tenant) by key. */
class Buckets {
  readonly #buckets = new Map<string, Bucket>();
  constructor(readonly options: BucketOptions) {}

  /** The key's bucket, refilled to `now`. */
  refilled(key: string, now: number): Bucket {
    const { perSecond, burst } = this.options;
    let bucket = this.#buckets.get(key);
    if (!bucket) {
      bucket = { tokens: burst, updatedAt: now };
      this.#buckets.set(key, bucket);
      if (this.#buckets.size > 100_000) this.#evictFull(now);
    }
    bucket.tokens = Math.min(burst, bucket.tokens + (Math.max(0, now - bucket.updatedAt) / 1000) * perSecond);
    bucket.updatedAt = now;
    return bucket;
  }

  /** Milliseconds until `bucket` holds `cost` (0 if it does). */
  waitFor(bucket: Bucket, cost: number): number {
    if (bucket.tokens >= cost) return 0;
    return Math.max(1, Math.ceil(((cost - bucket.tokens) / this.options.perSecond) * 1000));
  }

  // Buckets that have refilled completely carry no information; drop them to bound memory.
  #evictFull(now: number): void {
    for (const [key, bucket] of this.#buckets) {
      if (bucket.tokens + ((now - bucket.updatedAt) / 1000) * this.options.perSecond >= this.options.burst)
        this.#buckets.delete(key);
    }
  }
}

export class RateLimiter {
  readonly #identities: Buckets;
  readonly #tenants: Buckets | null;
  readonly #costs: Readonly<Record<string, number>>;
  readonly #now: () => number;

  constructor(options: RateLimitOptions, now: () => number = Date.now) {
    for (const [label, bucket] of [
      ['rateLimit', options],
      ['rateLimit.tenant', options.tenant || { perSecond: 1, burst: 1 }],
    ] as const) {
      if (!(bucket.perSecond > 0) || !(bucket.burst >= 1))
        throw new ComputeError('INVALID_CONFIG', `${label} needs perSecond > 0 and burst >= 1`, {
          details: { perSecond: bucket.perSecond, burst: bucket.burst },
          hint: 'For example rateLimit: { perSecond: 150, burst: 300 }; rateLimit: false turns the limit off.',
        });
    }
    for (const [method, cost] of Object.entries(options.costs ?? {}))
      if (!(cost >= 0))
        throw new ComputeError('INVALID_CONFIG', `rateLimit.costs.${method} must be a number >= 0`, {
          details: { method, cost },
        });
    this.#identities = new Buckets(options);
    this.#tenants = options.tenant ? new Buckets(options.tenant) : null;
    this.#costs = { ...DEFAULT_METHOD_COSTS, ...options.costs };
    this.#now = now;
  }

  /** What a call of `method` costs: the configured cost, else a read's or a change's. */
  costOf(method: string, kind: 'query' | 'mutation'): number {
    return this.#costs[method] ?? (kind === 'query' ? READ_COST : CHANGE_COST);
  }

  /**
   * Spends `cost` (1 by default) from the identity's bucket and, with `tenantId`, from its tenant's:
   * from both when both hold it, else from neither. Null when allowed, else which limit refused and
   * the wait until both have room. A cost above a bucket's burst is charged as the burst.
   */
  charge(principalId: string, call: { tenantId?: string | undefined; cost?: number } = {}): Refusal | null {
    const now = this.#now();
    const cost = call.cost ?? 1;
    if (cost === 0) return null;
    const identityCost = Math.min(cost, this.#identities.options.burst);
    const identity = this.#identities.refilled(principalId, now);
    const identityWait = this.#identities.waitFor(identity, identityCost);
    let tenantWait = 0;
    let tenant: Bucket | null = null;
    let tenantCost = 0;
    if (this.#tenants && call.tenantId !== undefined) {
      tenantCost = Math.min(cost, this.#tenants.options.burst);
      tenant = this.#tenants.refilled(call.tenantId, now);
      tenantWait = this.#tenants.waitFor(tenant, tenantCost);
    }
    if (identityWait > 0 || tenantWait > 0)
      return tenantWait > identityWait
        ? { waitMs: tenantWait, limit: 'tenant' }
        : { waitMs: identityWait, limit: 'identity' };
    identity.tokens -= identityCost;
    if (tenant) tenant.tokens -= tenantCost;
    return null;
  }

  /** Takes one token for `key` (an identity); returns 0 when allowed, else the milliseconds until one is free. */
  take(key: string): number {
    return this.charge(key)?.waitMs ?? 0;
  }
}

/** The refusal of a call over the limit, with the wait in `retryAfterMs` (and Retry-After). */
export function rateLimited(waitMs: number, limit: 'identity' | 'tenant' = 'identity'): ComputeError {
  return new ComputeError(
    'RATE_LIMITED',
    limit === 'tenant'
      ? 'too many requests from this tenant; slow down'
      : 'too many requests from this identity; slow down',
    {
      details: { retryAfterMs: waitMs, limit },
      hint:
        limit === 'tenant'
          ? `Wait ${Math.ceil(waitMs / 1000)} s before the next call; the tenant's identities share one limit (docs/rate-limits.md).`
          : `Wait ${Math.ceil(waitMs / 1000)} s before the next call; the limit is per identity (docs/rate-limits.md).`,
    },
  );
}
