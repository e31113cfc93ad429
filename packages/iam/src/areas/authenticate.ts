/**
 * Authenticate: a session token, an API key or a session JWT becomes an `Identity`, or null. Warm
 * answers come from the auth cache (expiry still checked on every hit); a miss reads the credential
 * with its principal and tenant in one query. An agent authenticates only while the person it acts
 * for is enabled.
 */
import { decodeProtectedHeader, jwtVerify } from 'jose';
import type { Selectable } from 'kysely';
import type { Identity, TenantState } from '@better-compute/core';
import type { TokenEntry } from '../cache.js';
import type { IamContext } from '../context.js';
import type { PrincipalsTable } from '../schema.js';
import { API_KEY_PREFIX, hashToken, hasTokenShape, safeEqual, SESSION_TOKEN_PREFIX } from '../secrets.js';
import { JWT_ALG, JWT_ISSUER } from '../signing-keys.js';
import { principalRow } from './principals.js';

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

type PrincipalFields = Pick<
  Selectable<PrincipalsTable>,
  'kind' | 'tenant_id' | 'display_name' | 'email' | 'acting_for'
> & { principal_id: string };

function identityOf(
  row: PrincipalFields,
  credential: { kind: Identity['credentialKind']; id: string; mfa: boolean; expiresAt: Date | null },
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
  return identity;
}

/** Whether the principal (and the person an agent acts for) may still authenticate. */
async function principalUsable(
  ctx: IamContext,
  row: { disabled: boolean; state: TenantState; acting_for: string | null },
): Promise<boolean> {
  if (row.disabled || row.state === 'deleted') return false;
  if (row.acting_for === null) return true;
  const person = await principalRow(ctx, row.acting_for);
  return person !== undefined && !person.disabled;
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
    if (row.revoked_at !== null || new Date(row.expires_at) <= now || !(await principalUsable(ctx, row)))
      return null;
    const expiresAt = new Date(row.expires_at);
    return {
      identity: identityOf(row, { kind: 'session', id: row.id, mfa: row.mfa, expiresAt }),
      principalId: row.principal_id,
      tenantId: row.tenant_id,
      actingFor: row.acting_for,
      credentialId: row.id,
      credentialKind: 'session',
      expiresAtMs: expiresAt.getTime(),
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
  if (
    row.revoked_at !== null ||
    (row.expires_at !== null && new Date(row.expires_at) <= now) ||
    !(await principalUsable(ctx, row))
  ) {
    return null;
  }
  const expiresAt = row.expires_at === null ? null : new Date(row.expires_at);
  return {
    identity: identityOf(row, { kind: 'api-key', id: row.id, mfa: false, expiresAt }),
    principalId: row.principal_id,
    tenantId: row.tenant_id,
    actingFor: row.acting_for,
    credentialId: row.id,
    credentialKind: 'api-key',
    expiresAtMs: expiresAt?.getTime() ?? null,
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
  if (!(await principalUsable(ctx, row))) return null;
  const expiresAtMs = Math.min(claims.exp * 1000, new Date(row.expires_at).getTime());
  return {
    identity: identityOf(row, { kind: 'jwt', id: row.id, mfa: row.mfa, expiresAt: new Date(expiresAtMs) }),
    principalId: row.principal_id,
    tenantId: row.tenant_id,
    actingFor: row.acting_for,
    credentialId: row.id,
    credentialKind: 'jwt',
    expiresAtMs,
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
