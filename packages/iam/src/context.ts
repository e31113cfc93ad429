/**
 * The one context every IAM area receives: the database, the clock, ids, the caps, the sealing key,
 * the auth cache and the change feed that keeps it true, the JWT signing keys, and the batched
 * last-used times. Areas touch nothing global; everything they share is here, built once by
 * `createContext`.
 */
import type { Kysely } from 'kysely';
import { ComputeError, type IdKind, type IdSource, newId } from '@better-compute/core';
import { IAM_LIMITS, type CreateIamOptions, type IamLimits } from './api.js';
import { AuthCache, type IamChange } from './cache.js';
import { ChangeFeed } from './change-feed.js';
import { LastUsed } from './last-used.js';
import type { PolicyRole } from './policy.js';
import type { IamDatabase } from './schema.js';
import { createSealer, type Sealer } from './sealing.js';
import { SigningKeys } from './signing-keys.js';

export type Db = Kysely<IamDatabase>;

const LIVE_TTL_MS = 60_000;
const UNSURE_TTL_MS = 1_000;

export interface IamContext {
  readonly db: Db;
  readonly clock: () => Date;
  readonly nowMs: () => number;
  /** A new id of the kind, from the injected clock. */
  readonly id: (kind: IdKind) => string;
  readonly limits: IamLimits;
  /** Seals secrets IAM must read back (TOTP seeds) under the deployment's secret. */
  readonly sealer: Sealer;
  readonly cache: AuthCache;
  readonly feed: ChangeFeed;
  readonly keys: SigningKeys;
  readonly sessionTtlMs: number;
  readonly jwtTtlSeconds: number;
  /** Compiled roles, keyed by id and actions, shared by every snapshot. */
  readonly rolePatterns: Map<string, PolicyRole>;
  readonly lastUsed: LastUsed;
}

export function createContext(options: CreateIamOptions): IamContext {
  const db = options.database.db as Db;
  const clock = options.clock ?? (() => new Date());
  const nowMs = () => clock().getTime();
  const idSource: IdSource = {
    now: nowMs,
    randomBytes: (size) => crypto.getRandomValues(new Uint8Array(size)),
  };
  // Derived once, at start (scrypt is slow on purpose), before the change feed starts.
  const sealer = createSealer(options.secret);
  const listenUrl = options.listenUrl ?? (options.database as { url?: unknown }).url;
  // Entries live long only while every change is known to reach this cache (see change-feed.ts).
  const cache: AuthCache = new AuthCache(
    () => Date.now(),
    (): number => (feed.live ? LIVE_TTL_MS : UNSURE_TTL_MS),
  );
  const feed: ChangeFeed = new ChangeFeed({
    kind: options.database.kind,
    key: options.database.db as object,
    listenUrl: typeof listenUrl === 'string' ? listenUrl : undefined,
    cache,
  });
  void feed.start();
  return {
    db,
    clock,
    nowMs,
    id: (kind) => newId(kind, idSource),
    limits: { ...IAM_LIMITS, ...options.limits },
    sealer,
    cache,
    feed,
    keys: new SigningKeys(db, clock),
    sessionTtlMs: options.sessionTtlMs ?? 12 * 3600_000,
    jwtTtlSeconds: options.jwtTtlSeconds ?? 600,
    rolePatterns: new Map(),
    lastUsed: new LastUsed(db, clock),
  };
}

/**
 * Runs a change in one transaction with its notification, then drops what it touched here: a
 * revoked key, session or binding is refused on the very next call.
 */
export async function change<T>(
  ctx: IamContext,
  work: (trx: Db) => Promise<{ result: T; changes: IamChange[] }>,
): Promise<T> {
  let nonce = '';
  let changes: IamChange[] = [];
  const result = await ctx.db.transaction().execute(async (trx) => {
    const outcome = await work(trx);
    changes = outcome.changes;
    if (changes.length > 0) nonce = await ctx.feed.notify(trx, changes);
    return outcome.result;
  });
  if (changes.length > 0) await ctx.feed.committed(changes, nonce);
  return result;
}

/**
 * Refuses a create that would take `what` past its cap. `count` counts what is held now, in the
 * create's own transaction after a lock serialised creates of the same holder.
 */
export async function underLimit(
  ctx: IamContext,
  limit: keyof IamLimits,
  what: string,
  count: () => Promise<number>,
): Promise<void> {
  const max = ctx.limits[limit];
  if ((await count()) >= max) {
    throw new ComputeError('QUOTA_EXCEEDED', `${what} is at its limit of ${max} (${limit})`, {
      details: { limit, max },
      hint: 'Remove or revoke one first, or ask the operator to raise the limit in the deployment’s configuration (iamLimits).',
    });
  }
}

export async function countOf(query: {
  executeTakeFirstOrThrow(): Promise<{ n: string | number | bigint }>;
}): Promise<number> {
  return Number((await query.executeTakeFirstOrThrow()).n);
}

export function notFound(what: string): ComputeError {
  return new ComputeError('NOT_FOUND', `${what} was not found`);
}

export function isUniqueViolation(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '23505';
}
