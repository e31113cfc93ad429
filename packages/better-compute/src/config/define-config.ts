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
   * a change 1 otherwise). What is set replaces its default; `false` turns the limit off.
   */
  rateLimit?: Partial<RateLimitOptions> | false;
  /** Caps of the embedded IAM per person and per tenant (API keys, sessions, principals, …). */
  iamLimits?: Partial<IamLimits>;
  /**
   * The deployment's secret, from which the keys that seal stored secrets are derived (TOTP seeds
   * today). Defaults to BETTER_COMPUTE_SECRET; never put the value itself in a file you commit.
   */
  secret?: string;
  /** Which modules this deployment serves; all by default. */
  modules?: ModuleName[];
}

/** Declares a configuration; returns its argument, typed. */
export function defineConfig(config: ComputeConfig): ComputeConfig {
  return config;
}
