/**
 * Idempotency keys (DESIGN section 4, step 8). The key's row, with the answer, is inserted by the
 * mutation's own transaction: a concurrent call with the same key waits for the first to end, then
 * finds the stored answer. The same key with another input is CONFLICT. Keys are kept
 * 24 hours. A kept answer's secrets (a method's `sealed` fields) are stored sealed under a key
 * derived from the idempotency key, which the database never holds.
 */
import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { canonicalJson, ComputeError } from '@better-compute/core';
import { sendAnsweredLater, sentWithCommit } from '@better-compute/db';
import { CompiledQuery, type Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import type { NewIdempotencyKey } from '../db/unit-of-work.js';

const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
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
  select input_hash, answer from compute.idempotency_keys where scope_hash = $1 and expires_at > $2`;

type IdempotencyClaim = { kind: 'new'; key: NewIdempotencyKey } | { kind: 'replay'; response: unknown };

/** A claim whose key has been asked for: `settle()` reads the answer and decides. */
export interface PendingClaim {
  settle(): Promise<IdempotencyClaim>;
}

/**
 * Takes the key for this call inside the mutation's transaction: `settle()` gives the first call's
 * answer, or the key to keep with this call's. Nothing is written until the call's record: the key
 * and its answer are one row, inserted with the change (docs/decisions/0003-idempotency.md).
 * `withNextStatement`: the key's read is not sent on its own but with the transaction's next
 * statement (the method's first), one round trip fewer; the caller settles the claim after the
 * method ran, and rolls the method's work back if a kept answer was found.
 */
export async function claimIdempotencyKey(
  trx: Kysely<ComputeTables>,
  scope: IdempotencyScope,
  input: Record<string, unknown>,
  now: Date,
  options: { withNextStatement?: boolean; secretInput?: boolean } = {},
): Promise<PendingClaim> {
  const scopeHash = sha256(canonicalJson([scope.tenantId, scope.principalId, scope.method, scope.key]));
  const { idempotencyKey: _key, ...rest } = input;
  // An input holding a secret (a secret's value) is hashed keyed by the idempotency key, which the
  // database never holds: a bare SHA-256 of it would be a hash to guess a weak value against.
  const inputHash = options.secretInput
    ? createHmac('sha256', `better-compute idempotent input ${scope.key}`)
        .update(canonicalJson(rest))
        .digest()
    : sha256(canonicalJson(rest));
  const lockKey = scopeHash.readBigInt64BE(0).toString();
  await trx.executeQuery(CompiledQuery.raw(LOCK, [lockKey]));
  const decide = (existing: { input_hash: Uint8Array; answer: Uint8Array } | undefined): IdempotencyClaim => {
    if (!existing) {
      const expiresAt = new Date(now.getTime() + IDEMPOTENCY_TTL_MS);
      return {
        kind: 'new',
        key: { scopeHash, tenantId: scope.tenantId, method: scope.method, inputHash, expiresAt },
      };
    }
    if (!inputHash.equals(existing.input_hash)) {
      throw new ComputeError('CONFLICT', 'this idempotency key was used with a different input', {
        details: { idempotencyKey: scope.key },
        hint: 'Use a new --key for a different request, or repeat the first request exactly.',
      });
    }
    return { kind: 'replay', response: unpackAnswer(existing.answer) };
  };
  type Kept = { input_hash: Uint8Array; answer: Uint8Array };
  if (options.withNextStatement) {
    const later = await sendAnsweredLater<Kept>(trx, KEPT, [scopeHash, now]);
    return { settle: async () => decide((await later.answer())[0]) };
  }
  const kept = await trx.executeQuery<Kept>(CompiledQuery.raw(KEPT, [scopeHash, now]));
  const claim = decide(kept.rows[0]);
  return { settle: async () => claim };
}

// A kept answer is stored compressed, which halves to quarters the row every create writes (about
// 0.8 KiB of JSON for a reservation). Its first byte names the format: 0 is the answer's JSON as
// UTF-8 (what keys written before compression became), 1 is its raw DEFLATE with ANSWER_WORDS as
// the preset dictionary. The dictionary may only ever be added to under a new format byte: a key
// written under one format is read under it for its 24 hours.
const PLAIN = 0;
const DEFLATED = 1;
// The names and values most answers share, the likeliest last (DEFLATE reaches back from the end).
const ANSWER_WORDS = Buffer.from(
  [
    '"nextCursor":null,"items":[{"name":"","description":null,"labels":{},"metadata":{},',
    '"siteId":"site_","projectId":"prj_","imageId":"img_","flavorId":"flv_","templateId":"',
    '"instanceId":"inst_","sandboxId":"sbx_","webhookId":"whk_","nodeId":"node_","expiresAt":"',
    '"updatedAt":"","deletedAt":null,"reason":null,"error":null,"secret":"sealed:v1:","token":"',
    '"queuePosition":null,"durationSeconds":3600,"tolerations":[],"selector":null,"nvlink":false,',
    '"binding":[{"nodeId":"node_","gpuModel":"H100","nodeState":"ready","gpuIndices":[0,1,2,3],',
    '"gpuProduct":"H100-SXM5-80GB","nvlinkDomain":"nvl-"}],"endedAt":null,"endReason":null,',
    '"gpuModel":null,"gpuProduct":null,"agentId":null,"ownerId":"usr_","activatedAt":"2026-',
    '{"id":"rsv_","tenantId":"","poolId":"pool_","gpus":1,"state":"active","health":"ok",',
    '"version":1,"createdAt":"2026-","endsAt":"2026-',
  ].join(''),
);

/** A kept answer as it is stored: format byte 1 and the compressed JSON. */
export function packAnswer(answer: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(answer ?? null), 'utf8');
  return Buffer.concat([Buffer.of(DEFLATED), deflateRawSync(json, { dictionary: ANSWER_WORDS })]);
}

/** A stored answer read back, in either format. */
export function unpackAnswer(stored: Uint8Array): unknown {
  const bytes = Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength);
  const body = bytes.subarray(1);
  if (bytes[0] === PLAIN) return JSON.parse(body.toString('utf8'));
  if (bytes[0] === DEFLATED)
    return JSON.parse(inflateRawSync(body, { dictionary: ANSWER_WORDS }).toString('utf8'));
  // Only a row changed behind the server's back, or written by a newer server, gets here.
  throw new ComputeError('INTERNAL', `a kept answer has an unknown format (${bytes[0]})`);
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
