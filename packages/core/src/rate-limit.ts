/**
 * Token buckets in memory: each replica limits what it serves. A call spends its method's cost from
 * its identity's bucket and from its tenant's (both, or neither); reads cost less than changes, and
 * a few heavy methods more (docs/rate-limits.md). Calls that no identity's budget covers (the public
 * methods: sign-in, a node's join, claim and heartbeat) spend from their client address's bucket
 * instead, and a refused credential from an address counts against it, so guessing from one address
 * slows down and then stops. Open event streams are counted per identity and per tenant. Cheap
 * enough to sit on every call (a few map lookups and a little arithmetic). One limiter serves a
 * deployment's compute routes and its embedded IAM's, so an identity, or an address, has one budget
 * across both.
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
  /**
   * Each client address's bucket for the public methods (sign-in, a node's join, claim and
   * heartbeat, …) and the upgrades that open tunnels and node sessions; `false` for none.
   */
  address?: Partial<BucketOptions> | false | undefined;
  /**
   * Each client address's refused credentials (a wrong password, join token, claim secret or node
   * credential): one token per refusal; with none left, the address's public calls are refused
   * before they run. `false` for none.
   */
  addressFailures?: Partial<BucketOptions> | false | undefined;
  /** Open event streams per identity and per tenant, in this process; `false` for no cap. */
  streams?: Partial<StreamCaps> | false | undefined;
}

export interface StreamCaps {
  perIdentity: number;
  perTenant: number;
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
 * A client address may make 20 public calls a second with bursts of 100, and have 20 credentials
 * refused, then one more every 15 s. An identity may hold 32 event streams open, a tenant 256.
 */
export const DEFAULT_RATE_LIMIT: Required<
  Omit<RateLimitOptions, 'costs' | 'address' | 'addressFailures' | 'streams'>
> & {
  costs: Record<string, number>;
  address: BucketOptions;
  addressFailures: BucketOptions;
  streams: StreamCaps;
} = {
  perSecond: 150,
  burst: 300,
  tenant: { perSecond: 600, burst: 1200 },
  costs: {},
  address: { perSecond: 20, burst: 100 },
  addressFailures: { perSecond: 1 / 15, burst: 20 },
  streams: { perIdentity: 32, perTenant: 256 },
};

/** Which limit refused a call. */
export type LimitName = 'identity' | 'tenant' | 'address' | 'address-failures';

interface Bucket {
  tokens: number;
  updatedAt: number;
}

/** Which limit refused a call, and how long until it has room for it. */
export interface Refusal {
  waitMs: number;
  limit: LimitName;
}

/** An event stream refused for the number already open: whose, and the cap. */
export interface StreamRefusal {
  limit: 'identity' | 'tenant';
  max: number;
}

/** Buckets of one kind kept at most; past it the full ones go, then the oldest. */
const MAX_BUCKETS = 100_000;

/** One kind of bucket (identity, tenant, address) by key. */
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
      if (this.#buckets.size > MAX_BUCKETS) this.#evict(now);
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

  /**
   * Buckets that have refilled completely carry no information; they go first. Keys an attacker
   * chooses (addresses) could still fill the map with partly spent buckets, so past half the cap
   * the oldest go too: a scan at most every MAX_BUCKETS / 2 new keys, and bounded memory.
   */
  #evict(now: number): void {
    for (const [key, bucket] of this.#buckets) {
      if (bucket.tokens + ((now - bucket.updatedAt) / 1000) * this.options.perSecond >= this.options.burst)
        this.#buckets.delete(key);
    }
    for (const key of this.#buckets.keys()) {
      if (this.#buckets.size <= MAX_BUCKETS / 2) break;
      this.#buckets.delete(key);
    }
  }
}

/** The key an address is counted under: an IPv4 address, or the /64 an IPv6 address is in. */
export function clientAddressKey(address: string): string {
  let text = address.trim().toLowerCase();
  if (text.startsWith('[') && text.includes(']')) text = text.slice(1, text.indexOf(']'));
  const zone = text.indexOf('%');
  if (zone !== -1) text = text.slice(0, zone);
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(text);
  if (mapped) return mapped[1]!;
  if (!text.includes(':')) return text.slice(0, 64);
  const groups = ipv6Groups(text);
  // One subscriber is given a /64 at least: counting each of its addresses apart would give it
  // 2^64 budgets.
  return groups
    ? `${groups
        .slice(0, 4)
        .map((g) => g.toString(16))
        .join(':')}::/64`
    : text.slice(0, 64);
}

/** The eight 16-bit groups of an IPv6 address in text, or null when it is none. */
function ipv6Groups(text: string): number[] | null {
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const parse = (part: string): number[] | null => {
    if (part === '') return [];
    const out: number[] = [];
    const pieces = part.split(':');
    for (const [i, piece] of pieces.entries()) {
      if (i === pieces.length - 1 && piece.includes('.')) {
        const octets = piece.split('.').map(Number);
        if (octets.length !== 4 || octets.some((o) => !Number.isInteger(o) || o < 0 || o > 255)) return null;
        out.push((octets[0]! << 8) | octets[1]!, (octets[2]! << 8) | octets[3]!);
      } else if (/^[0-9a-f]{1,4}$/.test(piece)) out.push(parseInt(piece, 16));
      else return null;
    }
    return out;
  };
  const head = parse(halves[0]!);
  const tail = halves.length === 2 ? parse(halves[1]!) : [];
  if (!head || !tail) return null;
  if (halves.length === 1) return head.length === 8 ? head : null;
  if (head.length + tail.length > 7) return null;
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}

/**
 * What a host knows of a request's client besides the request itself: its address (the socket's
 * peer, or X-Forwarded-For from a trusted proxy), by which calls without a credential are limited.
 * A host that does not know it leaves it out: those calls then have no per-address limit.
 */
export interface ClientInfo {
  clientAddress?: string | null | undefined;
}

/** One open event stream's place under the caps; `release` gives it back (once). */
export interface StreamSlot {
  release(): void;
}

/** The buckets an option names, over their defaults; null when turned off. */
function bucketsOf(
  label: string,
  option: Partial<BucketOptions> | false | undefined,
  defaults: BucketOptions,
): Buckets | null {
  if (option === false) return null;
  const bucket = { ...defaults, ...option };
  checkBucket(label, bucket);
  return new Buckets(bucket);
}

function checkBucket(label: string, bucket: BucketOptions): void {
  if (!(bucket.perSecond > 0) || !(bucket.burst >= 1))
    throw new ComputeError('INVALID_CONFIG', `${label} needs perSecond > 0 and burst >= 1`, {
      details: { perSecond: bucket.perSecond, burst: bucket.burst },
      hint: 'For example rateLimit: { perSecond: 150, burst: 300 }; rateLimit: false turns the limit off.',
    });
}

export class RateLimiter {
  readonly #identities: Buckets;
  readonly #tenants: Buckets | null;
  readonly #addresses: Buckets | null;
  readonly #failures: Buckets | null;
  readonly #costs: Readonly<Record<string, number>>;
  readonly #streamCaps: StreamCaps | null;
  readonly #streamsOf = { identity: new Map<string, number>(), tenant: new Map<string, number>() };
  readonly #now: () => number;

  constructor(options: RateLimitOptions, now: () => number = Date.now) {
    checkBucket('rateLimit', options);
    if (options.tenant) checkBucket('rateLimit.tenant', options.tenant);
    for (const [method, cost] of Object.entries(options.costs ?? {}))
      if (!(cost >= 0))
        throw new ComputeError('INVALID_CONFIG', `rateLimit.costs.${method} must be a number >= 0`, {
          details: { method, cost },
        });
    this.#identities = new Buckets(options);
    this.#tenants = options.tenant ? new Buckets(options.tenant) : null;
    this.#addresses = bucketsOf('rateLimit.address', options.address, DEFAULT_RATE_LIMIT.address);
    this.#failures = bucketsOf(
      'rateLimit.addressFailures',
      options.addressFailures,
      DEFAULT_RATE_LIMIT.addressFailures,
    );
    this.#streamCaps =
      options.streams === false ? null : { ...DEFAULT_RATE_LIMIT.streams, ...options.streams };
    for (const [name, cap] of Object.entries(this.#streamCaps ?? {}) as [string, number][])
      if (!Number.isInteger(cap) || cap < 1)
        throw new ComputeError('INVALID_CONFIG', `rateLimit.streams.${name} must be a whole number >= 1`, {
          details: { [name]: cap },
          hint: 'For example rateLimit: { streams: { perIdentity: 32, perTenant: 256 } }; streams: false for no cap.',
        });
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

  /**
   * Admits a call from the client `address` that spends no identity's budget (a public method, an
   * upgrade). Refused while the address has used up its refused credentials, before the call runs,
   * so a guess past them costs the server nothing; else `cost` is spent from the address's bucket.
   * Null when allowed, else which limit refused and the wait.
   */
  admitAddress(address: string, cost = 1): Refusal | null {
    const now = this.#now();
    const key = clientAddressKey(address);
    if (this.#failures) {
      const wait = this.#failures.waitFor(this.#failures.refilled(key, now), 1);
      if (wait > 0) return { waitMs: wait, limit: 'address-failures' };
    }
    if (this.#addresses && cost > 0) {
      const bucket = this.#addresses.refilled(key, now);
      const spent = Math.min(cost, this.#addresses.options.burst);
      const wait = this.#addresses.waitFor(bucket, spent);
      if (wait > 0) return { waitMs: wait, limit: 'address' };
      bucket.tokens -= spent;
    }
    return null;
  }

  /**
   * Counts a refused credential from `address`. Calls admitted together may all fail: the bucket
   * goes into debt for them (one burst at most), so racing the count buys nothing.
   */
  addressFailed(address: string): void {
    if (!this.#failures) return;
    const bucket = this.#failures.refilled(clientAddressKey(address), this.#now());
    bucket.tokens = Math.max(-this.#failures.options.burst, bucket.tokens - 1);
  }

  /**
   * Takes a place for one more open event stream of the identity and its tenant, or answers which
   * cap is reached. The slot is given back by `release` (the stream closed); giving it back twice
   * is harmless.
   */
  openStream(principalId: string, tenantId: string): StreamSlot | StreamRefusal {
    const caps = this.#streamCaps;
    if (!caps) return { release() {} };
    const { identity, tenant } = this.#streamsOf;
    if ((identity.get(principalId) ?? 0) >= caps.perIdentity)
      return { limit: 'identity', max: caps.perIdentity };
    if ((tenant.get(tenantId) ?? 0) >= caps.perTenant) return { limit: 'tenant', max: caps.perTenant };
    identity.set(principalId, (identity.get(principalId) ?? 0) + 1);
    tenant.set(tenantId, (tenant.get(tenantId) ?? 0) + 1);
    let held = true;
    return {
      release() {
        if (!held) return;
        held = false;
        for (const [counts, key] of [
          [identity, principalId],
          [tenant, tenantId],
        ] as const) {
          const left = (counts.get(key) ?? 1) - 1;
          if (left > 0) counts.set(key, left);
          else counts.delete(key);
        }
      },
    };
  }
}

/**
 * Whether a refusal is a credential that did not work (a wrong password, join token, claim secret
 * or node credential), which counts against the client address. A sign-in asked for its second
 * factor is not: the password was right.
 */
export function isRefusedCredential(error: unknown): boolean {
  if (!(error instanceof ComputeError) || error.code !== 'UNAUTHENTICATED') return false;
  return !(error.details?.mfaRequired === true && error.details.codeRejected !== true);
}

const REFUSALS: Record<LimitName, { message: string; why: string }> = {
  identity: { message: 'too many requests from this identity; slow down', why: 'the limit is per identity' },
  tenant: {
    message: 'too many requests from this tenant; slow down',
    why: "the tenant's identities share one limit",
  },
  address: {
    message: 'too many requests from this address; slow down',
    why: 'calls without a credential (sign-in, joining nodes) are limited per client address',
  },
  'address-failures': {
    message: 'too many refused credentials from this address; wait before trying again',
    why: 'wrong passwords, join tokens and node credentials are counted per client address',
  },
};

/** The refusal of a call over the limit, with the wait in `retryAfterMs` (and Retry-After). */
export function rateLimited(waitMs: number, limit: LimitName = 'identity'): ComputeError {
  const { message, why } = REFUSALS[limit];
  return new ComputeError('RATE_LIMITED', message, {
    details: { retryAfterMs: waitMs, limit },
    hint: `Wait ${Math.ceil(waitMs / 1000)} s before the next call; ${why} (docs/rate-limits.md).`,
  });
}

/** How long a client refused for its open streams is told to wait: a slot frees when one closes. */
export const STREAM_RETRY_MS = 5_000;

/**
 * The refusal of one event stream too many. RATE_LIMITED, so a reader that reconnects (its old
 * stream not yet seen closed here) waits and tries again rather than stopping for good.
 */
export function tooManyStreams(refusal: StreamRefusal): ComputeError {
  const whose = refusal.limit === 'identity' ? 'this identity' : 'this tenant';
  return new ComputeError('RATE_LIMITED', `${whose} has ${refusal.max} event streams open here, its limit`, {
    details: { retryAfterMs: STREAM_RETRY_MS, limit: refusal.limit, maxStreams: refusal.max },
    hint:
      refusal.limit === 'identity'
        ? 'Close a stream you no longer read, or share one stream between readers (docs/rate-limits.md).'
        : "Close streams the tenant no longer reads; the tenant's identities share one cap (docs/rate-limits.md).",
  });
}
