/**
 * Sessions: signing in with email, password and (when confirmed) a second factor, under per-account
 * throttling; a person's open sessions, revoking one, signing out; and the short-lived session JWT
 * issued from a session, with the public keys that verify it.
 */
import { SignJWT } from 'jose';
import { sql } from 'kysely';
import { ComputeError, isTenantId } from '@better-compute/core';
import type { Iam } from '../api.js';
import { change, countOf, type Db, type IamContext, notFound, underLimit } from '../context.js';
import {
  ownedCredentialRevoke,
  ownedCredentialsList,
  requireIdentity,
  type RouteBindings,
  sessionCookie,
} from '../routes.js';
import { pageOf, SESSION_COLUMNS, toPrincipal, toSession } from '../rows.js';
import { hashToken, newToken, SESSION_TOKEN_PREFIX, verifyPassword } from '../secrets.js';
import { JWT_ALG, JWT_ISSUER } from '../signing-keys.js';
import type { Session } from '../types.js';
import { normalEmail, requirePrincipal } from './principals.js';
import { spendSecondFactor } from './second-factor.js';

const SIGN_IN_FAILED = 'invalid email, password or tenant';
/** Failed sign-ins of one account that count together, and how many pass before it must wait. */
const SIGN_IN_WINDOW_MS = 15 * 60_000;
const SIGN_IN_FREE_FAILURES = 5;
/** The first wait, doubled with each further failure, never longer than the last. */
const SIGN_IN_FIRST_LOCK_MS = 30_000;
const SIGN_IN_MAX_LOCK_MS = 15 * 60_000;

// ---------------------------------------------------------------- sign-in throttling

/** Refuses a sign-in while the account is locked after repeated failures. */
async function checkSignInLock(ctx: IamContext, account: string): Promise<void> {
  const row = await ctx.db
    .selectFrom('iam.sign_in_attempts')
    .select('locked_until')
    .where('account_hash', '=', account)
    .executeTakeFirst();
  const until = row?.locked_until ? new Date(row.locked_until).getTime() : 0;
  const waitMs = until - ctx.nowMs();
  if (waitMs > 0) {
    throw new ComputeError(
      'RATE_LIMITED',
      'too many failed sign-ins for this account; wait before trying again',
      {
        details: { retryAfterMs: waitMs },
        hint: `Try again in ${Math.ceil(waitMs / 1000)} s. Lost the password? An administrator can give you a one-time password (better-iam users reset-password). Lost the authenticator? Sign in with a recovery code, or an administrator can remove the factor (better-iam users reset-totp).`,
      },
    );
  }
}

/**
 * Counts a failed sign-in in one statement (concurrent failures all count): failures within
 * SIGN_IN_WINDOW_MS add up, and from the SIGN_IN_FREE_FAILURES-th on the account waits, twice as
 * long each time, up to SIGN_IN_MAX_LOCK_MS.
 */
async function recordSignInFailure(ctx: IamContext, account: string): Promise<void> {
  const now = ctx.clock();
  const windowStart = new Date(now.getTime() - SIGN_IN_WINDOW_MS);
  await sql`
    insert into iam.sign_in_attempts as a (account_hash, failures, first_failed_at, locked_until)
    values (${account}, 1, ${now}, null)
    on conflict (account_hash) do update set
      failures = case when a.first_failed_at < ${windowStart} then 1 else a.failures + 1 end,
      first_failed_at = case when a.first_failed_at < ${windowStart} then ${now} else a.first_failed_at end,
      locked_until = case
        when a.first_failed_at < ${windowStart} or a.failures + 1 < ${SIGN_IN_FREE_FAILURES} then a.locked_until
        else ${now}::timestamptz + make_interval(secs => least(
          ${SIGN_IN_MAX_LOCK_MS / 1000}::float8,
          ${SIGN_IN_FIRST_LOCK_MS / 1000}::float8 * power(2, a.failures + 1 - ${SIGN_IN_FREE_FAILURES})))
      end`.execute(ctx.db);
}

// ---------------------------------------------------------------- sessions

async function createSession(
  ctx: IamContext,
  principalId: string,
  mfa: boolean,
  trx: Db,
): Promise<{ token: string; session: Session }> {
  const now = ctx.clock();
  await trx.selectFrom('iam.principals').select('id').where('id', '=', principalId).forUpdate().execute();
  await underLimit(ctx, 'sessionsPerPerson', `principal ${principalId}'s open sessions`, () =>
    countOf(
      trx
        .selectFrom('iam.sessions')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('principal_id', '=', principalId)
        .where('revoked_at', 'is', null)
        .where('expires_at', '>', now),
    ),
  );
  const token = newToken(SESSION_TOKEN_PREFIX);
  const row = await trx
    .insertInto('iam.sessions')
    .values({
      id: ctx.id('session'),
      principal_id: principalId,
      token_hash: hashToken(token),
      mfa,
      created_at: now,
      expires_at: new Date(now.getTime() + ctx.sessionTtlMs),
    })
    .returning(SESSION_COLUMNS)
    .executeTakeFirstOrThrow();
  return { token, session: toSession(row) };
}

async function revokeSessionById(ctx: IamContext, sessionId: string): Promise<Session> {
  return change(ctx, async (trx) => {
    const row = await trx
      .updateTable('iam.sessions')
      .set({ revoked_at: sql<Date>`coalesce(revoked_at, ${ctx.clock()})` })
      .where('id', '=', sessionId)
      .returning(SESSION_COLUMNS)
      .executeTakeFirst();
    if (!row) throw notFound(`session ${sessionId}`);
    return { result: toSession(row), changes: [{ type: 'credential', id: sessionId }] };
  });
}

/** Ends a person's open sessions but `keep`; the ids it ended. */
export async function endSessions(
  ctx: IamContext,
  trx: Db,
  principalId: string,
  keep?: string,
): Promise<string[]> {
  let query = trx
    .updateTable('iam.sessions')
    .set({ revoked_at: ctx.clock() })
    .where('principal_id', '=', principalId)
    .where('revoked_at', 'is', null);
  if (keep) query = query.where('id', '<>', keep);
  return (await query.returning('id').execute()).map((r) => r.id);
}

type SessionMethods =
  'signIn' | 'signOut' | 'getSession' | 'listSessions' | 'revokeSession' | 'issueSessionJwt' | 'jwks';

export function sessionService(ctx: IamContext): Pick<Iam, SessionMethods> {
  const { db, clock } = ctx;
  return {
    async signIn(email, password, tenantId, totp) {
      const account = hashToken(`${tenantId}\n${normalEmail(email)}`);
      await checkSignInLock(ctx, account);
      const row = isTenantId(tenantId)
        ? await db
            .selectFrom('iam.principals as p')
            .innerJoin('iam.tenants as t', 't.id', 'p.tenant_id')
            .select(['p.id', 'p.password_hash', 'p.disabled', 't.state'])
            .where('p.tenant_id', '=', tenantId)
            .where('p.email', '=', normalEmail(email))
            .where('p.kind', '=', 'person')
            .executeTakeFirst()
        : undefined;
      // The same check, and the same answer, for an unknown email, a wrong password and a disabled person.
      const passwordOk = await verifyPassword(password, row?.password_hash ?? null);
      if (!row || !passwordOk || row.disabled || row.state === 'deleted') {
        await recordSignInFailure(ctx, account);
        throw new ComputeError('UNAUTHENTICATED', SIGN_IN_FAILED);
      }
      if (row.state !== 'active')
        throw new ComputeError('TENANT_SUSPENDED', `tenant ${tenantId} is suspended`);
      try {
        return await db.transaction().execute(async (trx) => {
          const factor = await trx
            .selectFrom('iam.totp')
            .select(['secret', 'last_counter'])
            .where('principal_id', '=', row.id)
            .where('confirmed', '=', true)
            .forUpdate()
            .executeTakeFirst();
          if (factor) {
            if (totp === undefined) {
              throw new ComputeError('UNAUTHENTICATED', 'a TOTP code is required', {
                details: { mfaRequired: true },
                hint: 'Send the current code from your authenticator as totp.',
              });
            }
            if (!(await spendSecondFactor(ctx, trx, row.id, factor, totp))) {
              throw new ComputeError('UNAUTHENTICATED', 'invalid TOTP code', {
                details: { mfaRequired: true, codeRejected: true },
                hint: 'Give the current code from your authenticator, or one of your recovery codes.',
              });
            }
          }
          await trx.deleteFrom('iam.sign_in_attempts').where('account_hash', '=', account).execute();
          const { token, session } = await createSession(ctx, row.id, factor !== undefined, trx);
          const principal = toPrincipal(await requirePrincipal(ctx, row.id, trx));
          return { token, session, principal };
        });
      } catch (error) {
        // A wrong code is a failed attempt like a wrong password; asking for the code is not.
        if (error instanceof ComputeError && error.details?.codeRejected)
          await recordSignInFailure(ctx, account);
        throw error;
      }
    },
    signOut: (sessionId) => revokeSessionById(ctx, sessionId),
    async getSession(sessionId) {
      const row = await db
        .selectFrom('iam.sessions')
        .select(SESSION_COLUMNS)
        .where('id', '=', sessionId)
        .executeTakeFirst();
      if (!row) throw notFound(`session ${sessionId}`);
      return toSession(row);
    },
    async listSessions(principalId, page = {}) {
      const limit = page.limit ?? 50;
      let query = db
        .selectFrom('iam.sessions')
        .select(SESSION_COLUMNS)
        .where('principal_id', '=', principalId)
        .where('revoked_at', 'is', null)
        .where('expires_at', '>', clock())
        .orderBy('id')
        .limit(limit + 1);
      if (page.cursor !== undefined) query = query.where('id', '>', page.cursor);
      return pageOf((await query.execute()).map(toSession), limit);
    },
    revokeSession: (sessionId) => revokeSessionById(ctx, sessionId),
    async issueSessionJwt(sessionId) {
      const row = await db
        .selectFrom('iam.sessions as s')
        .innerJoin('iam.principals as p', 'p.id', 's.principal_id')
        .select([
          's.id',
          's.mfa',
          's.expires_at',
          's.revoked_at',
          's.principal_id',
          'p.tenant_id',
          'p.kind',
          'p.disabled',
        ])
        .where('s.id', '=', sessionId)
        .executeTakeFirst();
      const now = clock();
      if (!row || row.revoked_at !== null || new Date(row.expires_at) <= now || row.disabled) {
        throw new ComputeError('UNAUTHENTICATED', 'the session has ended');
      }
      const key = await ctx.keys.active();
      const issuedAt = Math.floor(now.getTime() / 1000);
      const expiresAt = Math.min(
        issuedAt + ctx.jwtTtlSeconds,
        Math.floor(new Date(row.expires_at).getTime() / 1000),
      );
      const token = await new SignJWT({ tenant: row.tenant_id, kind: row.kind, mfa: row.mfa, sid: row.id })
        .setProtectedHeader({ alg: JWT_ALG, kid: key.kid, typ: 'JWT' })
        .setIssuer(JWT_ISSUER)
        .setSubject(row.principal_id)
        .setIssuedAt(issuedAt)
        .setExpirationTime(expiresAt)
        .sign(key.privateKey);
      return { token, expiresAt: new Date(expiresAt * 1000).toISOString() };
    },
    async jwks() {
      return (await ctx.keys.jwks()) as { keys: Record<string, unknown>[] };
    },
  };
}

export function sessionRoutes(
  iam: Iam,
  now: () => Date,
): RouteBindings<
  'sessions.signIn' | 'sessions.signOut' | 'sessions.get' | 'sessions.list' | 'sessions.revoke' | 'jwt.issue'
> {
  return {
    'sessions.signIn': {
      async run(input, { url }) {
        const result = await iam.signIn(input.email, input.password, input.tenantId, input.totp);
        const maxAge = Math.max(
          0,
          Math.floor((Date.parse(result.session.expiresAt) - now().getTime()) / 1000),
        );
        return { data: result, headers: { 'set-cookie': sessionCookie(url, result.token, maxAge) } };
      },
    },
    'sessions.signOut': {
      async run(_input, context) {
        const identity = requireIdentity(context);
        const clear = { 'set-cookie': sessionCookie(context.url, '', 0) };
        if (identity.credentialKind === 'api-key') return { data: { revoked: false }, headers: clear };
        await iam.signOut(identity.credentialId);
        return { data: { revoked: true }, headers: clear };
      },
    },
    'sessions.get': {
      async run(_input, context) {
        const identity = requireIdentity(context);
        const session =
          identity.credentialKind === 'api-key' ? null : await iam.getSession(identity.credentialId);
        return { data: { identity, session } };
      },
    },
    'sessions.list': ownedCredentialsList(iam, (principalId, page) => iam.listSessions(principalId, page)),
    'sessions.revoke': ownedCredentialRevoke({
      type: 'iam-session',
      noun: 'session',
      idOf: (input: { sessionId: string }) => input.sessionId,
      get: (id) => iam.getSession(id),
      revoke: (id) => iam.revokeSession(id),
      iam,
    }),
    'jwt.issue': {
      async run(_input, context) {
        const identity = requireIdentity(context);
        if (identity.credentialKind === 'api-key') {
          throw new ComputeError('INVALID_STATE', 'jwt.issue needs a session credential, not an API key');
        }
        return { data: await iam.issueSessionJwt(identity.credentialId) };
      },
    },
  };
}
