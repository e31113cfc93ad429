/**
 * Authenticate: a session token, an API key or a session JWT becomes an `Identity`, or null. Warm
 * answers come from the auth cache (expiry still checked on every hit); a miss reads the credential
 * with its principal and tenant in one query. An agent authenticates only while the person it acts
 * for is enabled and its delegation is active; its identity then carries the delegation.
 */
import { decodeProtectedHeader, jwtVerify } from 'jose';
import type { Selectable } from 'kysely';
import type { Identity, IdentityDelegation, TenantState } from '@better-compute/core';
import type { TokenEntry } from '../cache.js';
import type { IamContext } from '../context.js';
import type { PrincipalsTable } from '../schema.js';
import { API_KEY_PREFIX, hashToken, hasTokenShape, safeEqual, SESSION_TOKEN_PREFIX } from '../secrets.js';
import { JWT_ALG, JWT_ISSUER } from '../signing-keys.js';
import { activeDelegation } from './delegations.js';
import { principalRow } from './principals.js';

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

type PrincipalFields = Pick<
  Selectable<PrincipalsTable>,
  'kind' | 'tenant_id' | 'display_name' | 'email' | 'acting_for'
> & { principal_id: string };

function identityOf(
  row: PrincipalFields,
  credential: { kind: Identity['credentialKind']; id: string; mfa: boolean; expiresAt: Date | null },
  usable: Usable,
): Identity {
  const identity: Identity = {
    principalId: row.principal_id,
    principalKind: row.kind,
    tenantId: row.tenant_id,
    credentialKind: credential.kind,
    credentialId: credential.id,
    mfa: credential.mfa,
    expiresAt: credential.expiresAt === null ? null : credential.expiresAt.toISOString(),
    displayName: row.display_name,
  };
  if (row.email !== null) identity.email = row.email;
  if (row.acting_for !== null) identity.actingFor = row.acting_for;
  if (usable.delegation) identity.delegation = usable.delegation;
  return identity;
}

/** What a usable principal's identity adds: an agent's delegation, and when that ends. */
interface Usable {
  delegation?: IdentityDelegation;
  /** The delegation's expiry in milliseconds, or null. */
  untilMs: number | null;
}

/** The earlier of two expiries (null is never). */
function earlier(a: number | null, b: number | null): number | null {
  if (a === null) return b;
  if (b === null) return a;
  return Math.min(a, b);
}

/**
 * Whether the principal may still authenticate (and the person an agent acts for, and the agent's
 * delegation): null when not, else what its identity adds.
 */
async function usableAs(
  ctx: IamContext,
  row: {
    principal_id: string;
    kind: string;
    disabled: boolean;
    state: TenantState;
    acting_for: string | null;
  },
): Promise<Usable | null> {
  if (row.disabled || row.state === 'deleted') return null;
  if (row.acting_for === null) return { untilMs: null };
  const person = await principalRow(ctx, row.acting_for);
  if (person === undefined || person.disabled) return null;
  if (row.kind !== 'agent') return { untilMs: null };
  const delegation = await activeDelegation(ctx, row.principal_id);
  if (delegation === undefined) return null;
  return {
    delegation: {
      id: delegation.id,
      confirm: [...delegation.confirm],
      spendLimitGpuHours:
        delegation.spend_limit_gpu_hours === null ? null : Number(delegation.spend_limit_gpu_hours),
    },
    untilMs: delegation.expires_at === null ? null : new Date(delegation.expires_at).getTime(),
  };
}

/** A session with what authenticating it needs of its principal and tenant. */
function sessionWithPrincipal(ctx: IamContext) {
  return ctx.db
    .selectFrom('iam.sessions as s')
    .innerJoin('iam.principals as p', 'p.id', 's.principal_id')
    .innerJoin('iam.tenants as t', 't.id', 'p.tenant_id')
    .select([
      's.id',
      's.token_hash',
      's.mfa',
      's.expires_at',
      's.revoked_at',
      's.principal_id',
      'p.kind',
      'p.tenant_id',
      'p.display_name',
      'p.email',
      'p.disabled',
      'p.acting_for',
      't.state',
    ]);
}

async function authenticateToken(
  ctx: IamContext,
  credential: string,
  hash: string,
): Promise<TokenEntry | null> {
  const isSession = credential.startsWith(SESSION_TOKEN_PREFIX);
  const now = ctx.clock();
  if (isSession) {
    const row = await sessionWithPrincipal(ctx).where('s.token_hash', '=', hash).executeTakeFirst();
    if (!row || !safeEqual(row.token_hash, hash)) return null;
    if (row.revoked_at !== null || new Date(row.expires_at) <= now) return null;
    const usable = await usableAs(ctx, row);
    if (usable === null) return null;
    const expiresAt = new Date(row.expires_at);
    return {
      identity: identityOf(row, { kind: 'session', id: row.id, mfa: row.mfa, expiresAt }, usable),
      principalId: row.principal_id,
      tenantId: row.tenant_id,
      actingFor: row.acting_for,
      credentialId: row.id,
      credentialKind: 'session',
      expiresAtMs: earlier(expiresAt.getTime(), usable.untilMs),
      storedAt: Date.now(),
    };
  }
  const row = await ctx.db
    .selectFrom('iam.api_keys as k')
    .innerJoin('iam.principals as p', 'p.id', 'k.principal_id')
    .innerJoin('iam.tenants as t', 't.id', 'p.tenant_id')
    .select([
      'k.id',
      'k.token_hash',
      'k.expires_at',
      'k.revoked_at',
      'k.principal_id',
      'p.kind',
      'p.tenant_id',
      'p.display_name',
      'p.email',
      'p.disabled',
      'p.acting_for',
      't.state',
    ])
    .where('k.token_hash', '=', hash)
    .executeTakeFirst();
  if (!row || !safeEqual(row.token_hash, hash)) return null;
  if (row.revoked_at !== null || (row.expires_at !== null && new Date(row.expires_at) <= now)) return null;
  const usable = await usableAs(ctx, row);
  if (usable === null) return null;
  const expiresAt = row.expires_at === null ? null : new Date(row.expires_at);
  return {
    identity: identityOf(row, { kind: 'api-key', id: row.id, mfa: false, expiresAt }, usable),
    principalId: row.principal_id,
    tenantId: row.tenant_id,
    actingFor: row.acting_for,
    credentialId: row.id,
    credentialKind: 'api-key',
    expiresAtMs: earlier(expiresAt?.getTime() ?? null, usable.untilMs),
    storedAt: Date.now(),
  };
}

async function authenticateJwt(ctx: IamContext, credential: string): Promise<TokenEntry | null> {
  let kid: string | undefined;
  try {
    kid = decodeProtectedHeader(credential).kid;
  } catch {
    return null;
  }
  if (typeof kid !== 'string' || kid.length > 100) return null;
  const key = await ctx.keys.verifier(kid);
  if (!key) return null;
  let claims: { sub?: string; sid?: unknown; exp?: number };
  try {
    ({ payload: claims } = await jwtVerify(credential, key, {
      issuer: JWT_ISSUER,
      algorithms: [JWT_ALG],
      currentDate: ctx.clock(),
    }));
  } catch {
    return null;
  }
  if (typeof claims.sid !== 'string' || typeof claims.sub !== 'string' || typeof claims.exp !== 'number')
    return null;
  const row = await sessionWithPrincipal(ctx).where('s.id', '=', claims.sid).executeTakeFirst();
  if (
    !row ||
    row.principal_id !== claims.sub ||
    row.revoked_at !== null ||
    new Date(row.expires_at) <= ctx.clock()
  )
    return null;
  const usable = await usableAs(ctx, row);
  if (usable === null) return null;
  const expiresAtMs = Math.min(claims.exp * 1000, new Date(row.expires_at).getTime());
  return {
    identity: identityOf(
      row,
      { kind: 'jwt', id: row.id, mfa: row.mfa, expiresAt: new Date(expiresAtMs) },
      usable,
    ),
    principalId: row.principal_id,
    tenantId: row.tenant_id,
    actingFor: row.acting_for,
    credentialId: row.id,
    credentialKind: 'jwt',
    expiresAtMs: earlier(expiresAtMs, usable.untilMs),
    storedAt: Date.now(),
  };
}

export async function authenticate(ctx: IamContext, credential: string): Promise<Identity | null> {
  if (typeof credential !== 'string' || credential.length === 0 || credential.length > 4096) return null;
  const isOpaque =
    hasTokenShape(credential, SESSION_TOKEN_PREFIX) || hasTokenShape(credential, API_KEY_PREFIX);
  if (!isOpaque && !JWT_SHAPE.test(credential)) return null;
  const hash = hashToken(credential);
  const cached = ctx.cache.token(hash);
  if (cached !== undefined) {
    // Expiry is checked on every hit: a cached session still ends on time.
    if (cached.expiresAtMs !== null && cached.expiresAtMs <= ctx.nowMs()) {
      ctx.cache.dropToken(hash);
      return null;
    }
    ctx.lastUsed.touch(cached);
    return cached.identity;
  }
  const generation = ctx.cache.generation;
  const entry = isOpaque
    ? await authenticateToken(ctx, credential, hash)
    : await authenticateJwt(ctx, credential);
  if (entry === null) return null;
  ctx.cache.setToken(hash, entry, generation);
  ctx.lastUsed.touch(entry);
  return entry.identity;
}
