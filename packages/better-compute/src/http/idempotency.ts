/**
 * Idempotency keys (DESIGN section 4, step 8). The key's row is inserted in the mutation's own
 * transaction: a concurrent call with the same key blocks on the unique index until the first
 * commits, then finds the stored answer. The same key with another input is CONFLICT. Keys are kept
 * 24 hours.
 */
import { createHash } from 'node:crypto';
import { ComputeError } from '@better-compute/core';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/** JSON with object keys sorted, so equal inputs hash equally whatever their key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

export interface IdempotencyScope {
  tenantId: string;
  principalId: string;
  method: string;
  key: string;
}

export type IdempotencyClaim = { kind: 'new'; scopeHash: string } | { kind: 'replay'; response: unknown };

/** Claims the key inside the mutation's transaction, or returns the first call's answer. */
export async function claimIdempotencyKey(
  trx: Kysely<ComputeTables>,
  scope: IdempotencyScope,
  input: Record<string, unknown>,
  now: Date,
): Promise<IdempotencyClaim> {
  const scopeHash = sha256(canonicalJson([scope.tenantId, scope.principalId, scope.method, scope.key]));
  const { idempotencyKey: _key, ...rest } = input;
  const inputHash = sha256(canonicalJson(rest));
  // One statement claims a new key, or takes over one past its 24 hours (forgotten: the call runs as
  // new); a live key is left alone and read below.
  const inserted = await trx
    .insertInto('compute.idempotency_keys')
    .values({
      scope_hash: scopeHash,
      tenant_id: scope.tenantId,
      method: scope.method,
      input_hash: inputHash,
      response: null,
      expires_at: new Date(now.getTime() + IDEMPOTENCY_TTL_MS),
    })
    .onConflict((oc) =>
      oc
        .column('scope_hash')
        .doUpdateSet((eb) => ({
          input_hash: eb.ref('excluded.input_hash'),
          response: null,
          created_at: now,
          expires_at: eb.ref('excluded.expires_at'),
        }))
        .where('compute.idempotency_keys.expires_at', '<=', now),
    )
    .returning('scope_hash')
    .executeTakeFirst();
  if (inserted) return { kind: 'new', scopeHash };
  const existing = await trx
    .selectFrom('compute.idempotency_keys')
    .select(['input_hash', 'response'])
    .where('scope_hash', '=', scopeHash)
    .executeTakeFirstOrThrow();
  if (existing.input_hash !== inputHash) {
    throw new ComputeError('CONFLICT', 'this idempotency key was used with a different input', {
      details: { idempotencyKey: scope.key },
      hint: 'Use a new --key for a different request, or repeat the first request exactly.',
    });
  }
  return { kind: 'replay', response: existing.response };
}

/** Forgets keys older than 24 hours; the maintenance job calls it. */
export async function purgeExpiredIdempotencyKeys(db: Kysely<ComputeTables>, now: Date): Promise<number> {
  const result = await db
    .deleteFrom('compute.idempotency_keys')
    .where('expires_at', '<=', now)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
