/**
 * Idempotency keys (DESIGN section 4, step 8). The key's row, with the answer, is inserted by the
 * mutation's own transaction: a concurrent call with the same key waits for the first to end, then
 * finds the stored answer. The same key with another input is CONFLICT. Keys are kept
 * 24 hours. A kept answer's secrets (a method's `sealed` fields) are stored sealed under a key
 * derived from the idempotency key, which the database never holds.
 */
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import { canonicalJson, ComputeError } from '@better-compute/core';
import { sentWithCommit } from '@better-compute/db';
import { CompiledQuery, type Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import type { NewIdempotencyKey } from '../db/unit-of-work.js';

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

export interface IdempotencyScope {
  tenantId: string;
  principalId: string;
  method: string;
  key: string;
}

// Calls with one key run one at a time: each takes a transaction-scoped advisory lock named by the
// key's scope hash before it reads the key, so a call whose twin is still running waits for it and
// then finds its answer. The lock is sent with the read (one round trip), and the read, a statement
// of its own, takes its snapshot once the lock is held. A key past its 24 hours is forgotten here.
const LOCK = sentWithCommit('select pg_advisory_xact_lock($1::bigint)');
const KEPT = `
  with forgotten as (
    delete from compute.idempotency_keys where scope_hash = $1 and expires_at <= $2)
  select input_hash, response from compute.idempotency_keys where scope_hash = $1 and expires_at > $2`;

export type IdempotencyClaim =
  { kind: 'new'; key: NewIdempotencyKey } | { kind: 'replay'; response: unknown };

/**
 * Takes the key for this call inside the mutation's transaction, or returns the first call's
 * answer. Nothing is written until the call's record: the key and its answer are one row, inserted
 * with the change (docs/decisions/0003-idempotency.md).
 */
export async function claimIdempotencyKey(
  trx: Kysely<ComputeTables>,
  scope: IdempotencyScope,
  input: Record<string, unknown>,
  now: Date,
): Promise<IdempotencyClaim> {
  const scopeHash = sha256(canonicalJson([scope.tenantId, scope.principalId, scope.method, scope.key]));
  const { idempotencyKey: _key, ...rest } = input;
  const inputHash = sha256(canonicalJson(rest));
  const lockKey = BigInt.asIntN(64, BigInt(`0x${scopeHash.slice(0, 16)}`)).toString();
  await trx.executeQuery(CompiledQuery.raw(LOCK, [lockKey]));
  const kept = await trx.executeQuery<{ input_hash: string; response: unknown }>(
    CompiledQuery.raw(KEPT, [scopeHash, now]),
  );
  const existing = kept.rows[0];
  if (!existing) {
    const expiresAt = new Date(now.getTime() + IDEMPOTENCY_TTL_MS);
    return {
      kind: 'new',
      key: { scopeHash, tenantId: scope.tenantId, method: scope.method, inputHash, expiresAt },
    };
  }
  if (existing.input_hash !== inputHash) {
    throw new ComputeError('CONFLICT', 'this idempotency key was used with a different input', {
      details: { idempotencyKey: scope.key },
      hint: 'Use a new --key for a different request, or repeat the first request exactly.',
    });
  }
  return { kind: 'replay', response: existing.response };
}

// Sealed values: `sealed:v1:` + base64url(12-byte IV | AES-256-GCM ciphertext | 16-byte tag).
const SEALED = 'sealed:v1:';

/**
 * The key that seals a kept answer's secrets: HKDF-SHA256 of the idempotency key, salted with who
 * called what. A replay carries the idempotency key, so it can open them; a reader of the table
 * cannot, unless the key can be guessed (the CLI's own keys carry 122 random bits; the key's scope
 * hash is a plain SHA-256, so a guessable key is as exposed there as here).
 */
function sealingKey(scope: IdempotencyScope): Buffer {
  const salt = canonicalJson([scope.tenantId, scope.principalId, scope.method]);
  return Buffer.from(hkdfSync('sha256', scope.key, salt, 'better-compute kept answer', 32));
}

/** A copy of `answer` with each named top-level string field passed through `change`. */
function withFields(
  answer: unknown,
  fields: readonly string[] | undefined,
  change: (value: string) => string,
): unknown {
  if (!fields?.length || !answer || typeof answer !== 'object') return answer;
  const copy: Record<string, unknown> = { ...(answer as Record<string, unknown>) };
  for (const field of fields) {
    const value = copy[field];
    if (typeof value === 'string') copy[field] = change(value);
  }
  return copy;
}

/** The answer to keep: the named top-level string fields sealed, the rest as it is. */
export function sealFields(
  answer: unknown,
  fields: readonly string[] | undefined,
  scope: IdempotencyScope,
): unknown {
  return withFields(answer, fields, (value) => {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', sealingKey(scope), iv);
    const sealed = Buffer.concat([iv, cipher.update(value, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return SEALED + sealed.toString('base64url');
  });
}

/** A kept answer as it is replayed: its sealed fields opened with the same scope's key. */
export function openFields(
  kept: unknown,
  fields: readonly string[] | undefined,
  scope: IdempotencyScope,
): unknown {
  return withFields(kept, fields, (value) => {
    if (!value.startsWith(SEALED)) return value;
    const sealed = Buffer.from(value.slice(SEALED.length), 'base64url');
    try {
      const decipher = createDecipheriv('aes-256-gcm', sealingKey(scope), sealed.subarray(0, 12));
      decipher.setAuthTag(sealed.subarray(sealed.length - 16));
      return Buffer.concat([
        decipher.update(sealed.subarray(12, sealed.length - 16)),
        decipher.final(),
      ]).toString('utf8');
    } catch (cause) {
      // Only a row changed behind the server's back gets here: the scope hash matched, so did the key.
      throw new ComputeError('INTERNAL', 'a kept answer could not be opened', { cause });
    }
  });
}

/** Forgets keys older than 24 hours; the maintenance job calls it. */
export async function purgeExpiredIdempotencyKeys(db: Kysely<ComputeTables>, now: Date): Promise<number> {
  const result = await db
    .deleteFrom('compute.idempotency_keys')
    .where('expires_at', '<=', now)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
