/**
 * API keys: created for a principal (shown once, stored as a hash, at most ten years of life, up to
 * the per-principal cap), read, listed and revoked. A revoked key is refused on the next call.
 */
import { sql } from 'kysely';
import { ComputeError } from '@better-compute/core';
import type { CreatedApiKey, Iam } from '../api.js';
import { change, countOf, type IamContext, notFound, underLimit } from '../context.js';
import {
  ownedCredentialRevoke,
  ownedCredentialsList,
  principalIn,
  principalResource,
  requireIdentity,
  type RouteBindings,
  selfOr,
} from '../routes.js';
import { API_KEY_COLUMNS, pageOf, toApiKey } from '../rows.js';
import { API_KEY_PREFIX, hashToken, newToken } from '../secrets.js';
import { requirePrincipal } from './principals.js';

/** The longest an API key may be given to live (docs/security.md). */
const API_KEY_MAX_LIFETIME_MS = 10 * 365.25 * 24 * 3600 * 1000;

export async function createApiKey(
  ctx: IamContext,
  principalId: string,
  input: { name: string; expiresAt?: string | Date },
): Promise<CreatedApiKey> {
  const { db, clock } = ctx;
  const principal = await requirePrincipal(ctx, principalId);
  if (principal.disabled) throw new ComputeError('INVALID_STATE', `principal ${principalId} is disabled`);
  let expiresAt: Date | null = null;
  if (input.expiresAt !== undefined) {
    expiresAt = new Date(input.expiresAt);
    if (Number.isNaN(expiresAt.getTime()) || expiresAt <= clock()) {
      throw new ComputeError('INVALID_ARGUMENT', 'expiresAt must be a time in the future', {
        details: { field: 'expiresAt' },
      });
    }
    // A key that outlives every rotation policy is a key nobody remembers to revoke.
    if (expiresAt.getTime() - clock().getTime() > API_KEY_MAX_LIFETIME_MS) {
      throw new ComputeError('INVALID_ARGUMENT', 'expiresAt must be within 10 years from now', {
        details: { field: 'expiresAt' },
        hint: 'Give a time within 10 years, or leave expiresAt out for a key that lasts until it is revoked.',
      });
    }
  }
  const name = input.name.trim();
  if (name.length === 0 || name.length > 100) {
    throw new ComputeError('INVALID_ARGUMENT', 'name must be 1 to 100 characters', {
      details: { field: 'name' },
    });
  }
  const key = newToken(API_KEY_PREFIX);
  const row = await db.transaction().execute(async (trx) => {
    const now = clock();
    await trx.selectFrom('iam.principals').select('id').where('id', '=', principalId).forUpdate().execute();
    await underLimit(ctx, 'apiKeysPerPrincipal', `principal ${principalId}'s API keys`, () =>
      countOf(
        trx
          .selectFrom('iam.api_keys')
          .select((eb) => eb.fn.countAll().as('n'))
          .where('principal_id', '=', principalId)
          .where('revoked_at', 'is', null)
          .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)])),
      ),
    );
    return trx
      .insertInto('iam.api_keys')
      .values({
        id: ctx.id('apiKey'),
        principal_id: principalId,
        token_hash: hashToken(key),
        name,
        created_at: now,
        expires_at: expiresAt,
      })
      .returning(API_KEY_COLUMNS)
      .executeTakeFirstOrThrow();
  });
  return { key, apiKey: toApiKey(row) };
}

export function apiKeyService(
  ctx: IamContext,
): Pick<Iam, 'createApiKey' | 'getApiKey' | 'listApiKeys' | 'revokeApiKey'> {
  const { db, clock } = ctx;
  return {
    createApiKey: (principalId, input) => createApiKey(ctx, principalId, input),
    async getApiKey(keyId) {
      const row = await db
        .selectFrom('iam.api_keys')
        .select(API_KEY_COLUMNS)
        .where('id', '=', keyId)
        .executeTakeFirst();
      if (!row) throw notFound(`API key ${keyId}`);
      return toApiKey(row);
    },
    async listApiKeys(principalId, input = {}) {
      const limit = input.limit ?? 50;
      let query = db
        .selectFrom('iam.api_keys')
        .select(API_KEY_COLUMNS)
        .where('principal_id', '=', principalId)
        .orderBy('id')
        .limit(limit + 1);
      if (input.cursor !== undefined) query = query.where('id', '>', input.cursor);
      return pageOf((await query.execute()).map(toApiKey), limit);
    },
    async revokeApiKey(keyId) {
      return change(ctx, async (trx) => {
        const row = await trx
          .updateTable('iam.api_keys')
          .set({ revoked_at: sql<Date>`coalesce(revoked_at, ${clock()})` })
          .where('id', '=', keyId)
          .returning(API_KEY_COLUMNS)
          .executeTakeFirst();
        if (!row) throw notFound(`API key ${keyId}`);
        return { result: toApiKey(row), changes: [{ type: 'credential', id: keyId }] };
      });
    },
  };
}

export function apiKeyRoutes(iam: Iam): RouteBindings<'apiKeys.create' | 'apiKeys.list' | 'apiKeys.revoke'> {
  return {
    'apiKeys.create': {
      resource: (input, { identity, tenantId }) =>
        principalResource(selfOr(input.principalId, identity), tenantId),
      async run(input, context) {
        const principal = await principalIn(
          iam,
          selfOr(input.principalId, requireIdentity(context)),
          context.tenantId,
        );
        const options =
          input.expiresAt === undefined
            ? { name: input.name }
            : { name: input.name, expiresAt: input.expiresAt };
        return { data: await iam.createApiKey(principal.id, options) };
      },
    },
    'apiKeys.list': ownedCredentialsList(iam, (principalId, page) => iam.listApiKeys(principalId, page)),
    'apiKeys.revoke': ownedCredentialRevoke({
      type: 'iam-api-key',
      noun: 'API key',
      idOf: (input: { apiKeyId: string }) => input.apiKeyId,
      get: (id) => iam.getApiKey(id),
      revoke: (id) => iam.revokeApiKey(id),
      iam,
    }),
  };
}
