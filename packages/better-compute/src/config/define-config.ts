/**
 * A deployment's configuration, as `better-compute.config.ts` exports it.
 */
import type { IamBridge, ModuleName, RateLimitOptions } from '@better-compute/core';
import type { Database } from '@better-compute/db';
import type { IamLimits } from 'better-iam';

export interface ComputeConfig {
  /**
   * The store: `postgres://…`, `pglite:memory` or `pglite:/path/to/dir`, or an open database.
   * Defaults to BETTER_COMPUTE_DATABASE_URL.
   */
  database?: string | Database;
  /** Where compute's routes are mounted; default `/api/compute`. IAM's are at `/api/iam`. */
  basePath?: string;
  /**
   * Origins whose pages may call with a cookie credential (the console). A cookie is accepted only
   * on a POST with `X-Better-Compute: 1` and an `Origin` in this list. Without it, only from a
   * loopback origin (`doctor` says so).
   */
  trustedOrigins?: string[];
  /** Decides every call. Defaults to the embedded Better IAM over the same database. */
  iam?: IamBridge;
  /**
   * The rate limit (docs/rate-limits.md), across compute's routes and the embedded IAM's: tokens per
   * second and burst per identity (`perSecond`, `burst`), per tenant (`tenant`, or `false` for
   * none), and a call's cost by method (`costs`, e.g. `{ 'usage.export': 10 }`; a read costs 0.5 and
   * a change 1 otherwise); per client address for calls without a credential (`address`) and for
   * refused credentials (`addressFailures`); open event streams per identity and per tenant
   * (`streams`). What is set replaces its default; `false` turns every limit off.
   */
  rateLimit?: (Partial<RateLimitOptions> & RateLimitAddressing) | false;
  /** Caps of the embedded IAM per person and per tenant (API keys, sessions, principals, …). */
  iamLimits?: Partial<IamLimits>;
  /**
   * The deployment's secret, from which the keys that seal stored secrets are derived (TOTP seeds
   * today). Defaults to BETTER_COMPUTE_SECRET; never put the value itself in a file you commit.
   */
  secret?: string;
  /**
   * The PKI bundle (`better-compute pki init`): its path, relative to the working directory; default
   * `.better-compute/pki.json`. When set, `serve`'s gateway signs commands with the bundle's command
   * root (its private key opened with `secret`) and `doctor` checks the bundle.
   */
  pki?: string;
  /** Break-glass SSH certificates (docs/break-glass-ssh.md). */
  breakGlassSsh?: {
    /** Whether `nodes.issueSshCert` needs a session opened with a second factor; default true. */
    requireMfa?: boolean;
  };
  /** Agent sandboxes (docs/decisions/sandboxes-snapshots.md). */
  sandboxes?: {
    /**
     * Where sandbox snapshots are kept: `'node'` (the default), each node's own store beside its
     * sandboxes; `false`, nowhere: snapshots and restores are refused with INVALID_CONFIG.
     */
    snapshots?: 'node' | false;
  };
  /** The outbox of events. */
  events?: {
    /**
     * How long an event stays in the outbox (`30d`, `12h`, or seconds); forever when absent. Audit
     * entries are never deleted by it (docs/audit.md).
     */
    retention?: string | number;
  };
  /** The tamper-evident audit log's seal (docs/audit.md). */
  audit?: {
    /**
     * Seconds between checkpoints of the `controllers` role; default 3600 (`dev`: 60). The audit
     * key is the bundle's (`pki`), opened with `secret`.
     */
    checkpointEverySeconds?: number;
  };
  /**
   * The live event stream (`GET {basePath}/watch`, docs/live-events.md): more paths to serve it
   * at (default `['/watch']`, the path `events watch --path` defaults to), and its timings.
   */
  live?: {
    paths?: string[];
    /** Milliseconds between keep-alive comments on an idle stream; default 15 000. */
    heartbeatMs?: number;
    /** The reconnection delay the stream advises (`retry:`); default 2 000. */
    retryMs?: number;
    /** Milliseconds between safety-net reads when notifications may have been missed; default 5 000. */
    pollMs?: number;
    /** Milliseconds between re-authorizations of every open stream; default 30 000. */
    reauthorizeMs?: number;
  };
  /**
   * Signed bcd releases (docs/releases.md): the release keys that may sign them, as key ids
   * (`sha256/…`, what `better-compute release keygen` prints) or public keys, and how many distinct
   * pinned keys must have signed a release before `releases.register` accepts it (1 to the number of
   * pins; default every pin). Checked at start: a malformed pin or threshold is INVALID_CONFIG.
   * Without pins, releases are listed but none is registered.
   */
  release?: {
    pins: string[];
    threshold?: number;
  };
  /** Which modules this deployment serves; all by default. */
  modules?: ModuleName[];
  /** Webhook deliveries: where they may go, how they are retried (docs/webhooks.md). */
  webhooks?: WebhookSettings;
}

/** Where the client's address is read from (docs/rate-limits.md). */
interface RateLimitAddressing {
  /**
   * The proxies in front of the server (addresses or CIDR ranges: `'10.0.0.0/8'`, `'fd00::/8'`,
   * `'127.0.0.1'`). A request whose peer is one of them is counted under the rightmost address of
   * its X-Forwarded-For that is not; from any other peer X-Forwarded-For is ignored, since the
   * client writes it. Default none: the socket's peer is the client.
   */
  trustedProxies?: string[];
}

/** An address a name resolves to, as `dns.lookup(name, { all: true })` answers. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export interface WebhookSettings {
  /**
   * Let endpoints point at private, link-local, CGNAT and other non-public addresses (an on-premises
   * receiver). Off by default: a tenant's webhook must not reach the deployment's own network.
   */
  allowPrivateAddresses?: boolean;
  /** Let endpoints point at loopback (`http://127.0.0.1:…`, `localhost`); on by default. */
  allowLoopback?: boolean;
  /** Webhooks per tenant, at most; default 25. */
  maxPerTenant?: number;
  /** The wait before each retry, in milliseconds; default 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h. */
  retrySchedule?: readonly number[];
  /** How far a retry's wait is spread, as a fraction of it (default 0.2: ±20 %). */
  jitter?: number;
  /** An endpoint failing continuously for this long is disabled; default 5 days. */
  disableAfterMs?: number;
  /** How long one attempt may take, connection to last byte read; default 10 s. */
  requestTimeoutMs?: number;
  /** How often the delivery loops look for work, in milliseconds; default 250. */
  pollMs?: number;
  /** How long a finished delivery and its attempts are kept; default 30 days. */
  deliveryRetentionMs?: number;
  /** Resolves endpoint names at delivery time; default `dns.lookup` (tests inject their own). */
  lookup?: (hostname: string) => Promise<ResolvedAddress[]>;
}

/** Declares a configuration; returns its argument, typed. */
export function defineConfig(config: ComputeConfig): ComputeConfig {
  return config;
}
