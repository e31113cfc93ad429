/**
 * A deployment's configuration, as `better-compute.config.ts` exports it.
 */
import type { IamBridge, ModuleName } from '@better-compute/core';
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
   * Requests per second and burst allowed per identity, across compute's routes and the embedded
   * IAM's; `false` turns the limit off.
   */
  rateLimit?: { perSecond: number; burst: number } | false;
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
  /** Which modules this deployment serves; all by default. */
  modules?: ModuleName[];
}

/** Declares a configuration; returns its argument, typed. */
export function defineConfig(config: ComputeConfig): ComputeConfig {
  return config;
}
