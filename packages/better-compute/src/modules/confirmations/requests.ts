/**
 * The pipeline's side of confirmations (http/confirmation.ts calls these through the module's
 * index): `admit` finds the confirmation of an agent's call (by its delegation, method and input
 * digest) and answers whether it may run, or asks for one and refuses with CONFIRMATION_REQUIRED;
 * `consume` spends an approved one in the call's own transaction; `endRevoked` ends the open
 * confirmations of delegations IAM no longer counts.
 */
import { createHash, createHmac } from 'node:crypto';
import { canonicalJson, ComputeError, newId } from '@better-compute/core';
import {
  CONFIRMATION_PENDING_SECONDS,
  type ConfirmationCall,
  type ConfirmationTicket,
} from '@better-compute/core/methods';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { writeEvents } from '../../db/unit-of-work.js';
import type { EventDraft } from '../define-module.js';
import { type ConfirmationRow, confirmationsDb } from './tables.js';
import { confirmationEvent, expireDue, stateAt } from './views.js';

/** Input fields whose values never reach a summary (and so never the person's screen or the table). */
const SECRET_FIELD = /secret|password|passphrase|token|credential|private|signature/i;
const REMOVED = '[secret removed]';

function redacted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redacted);
  if (value && typeof value === 'object')
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>).map(([key, field]) => [
        key,
        SECRET_FIELD.test(key) ? REMOVED : redacted(field),
      ]),
    );
  return value;
}

/**
 * The method and exactly the input it would run with, as canonical JSON; secret fields show only
 * that they were there, and the idempotency key (which opens sealed kept answers) is left out.
 */
function summaryOf(
  method: string,
  input: Record<string, unknown>,
  secretInput: readonly string[] = [],
): string {
  const { idempotencyKey: _key, ...rest } = input;
  for (const field of secretInput) if (field in rest) rest[field] = REMOVED;
  return `${method} ${canonicalJson(redacted(rest))}`;
}

/**
 * SHA-256 of the canonical validated input, its idempotency key included: the retry must send
 * exactly it. An input holding a secret (secretInput) is hashed keyed by its idempotency key when it
 * has one, so the table holds no bare hash of the secret to guess against.
 */
function inputDigest(input: Record<string, unknown>, secretInput: readonly string[] = []): string {
  const text = canonicalJson(input);
  const key = input.idempotencyKey;
  if (secretInput.length > 0 && typeof key === 'string')
    return createHmac('sha256', `better-compute confirmation input ${key}`).update(text).digest('hex');
  return createHash('sha256').update(text).digest('hex');
}

function required(row: ConfirmationRow): ComputeError {
  return new ComputeError(
    'CONFIRMATION_REQUIRED',
    `${row.method} needs the confirmation of ${row.person_id}, whom agent ${row.agent_id} acts for: confirmation ${row.id} waits until ${new Date(row.expires_at).toISOString()}`,
    {
      details: {
        confirmationId: row.id,
        summary: row.summary,
        expiresAt: new Date(row.expires_at).toISOString(),
        reason: row.reason,
      },
      hint: `Ask ${row.person_id} to run better-compute confirmations approve ${row.id} (signed in with their second factor); then retry this call with the same input and the same idempotency key.`,
    },
  );
}

/** How long a declined call stays refused as it is: the window it was asked in. */
const DECLINED_HOLDS_MS = CONFIRMATION_PENDING_SECONDS * 1000;

export async function admit(
  db: Kysely<ComputeTables>,
  call: ConfirmationCall,
  now: Date,
): Promise<ConfirmationTicket> {
  try {
    return await admitOnce(db, call, now);
  } catch (error) {
    // Two first calls at once: the second's insert met the first's; it finds that one now.
    if ((error as { code?: unknown }).code === '23505') return admitOnce(db, call, now);
    throw error;
  }
}

async function admitOnce(
  db: Kysely<ComputeTables>,
  call: ConfirmationCall,
  now: Date,
): Promise<ConfirmationTicket> {
  const digest = inputDigest(call.input, call.secretInput);
  const where = { delegationId: call.delegationId, method: call.method, inputDigest: digest };
  const outcome = await db.transaction().execute(async (trx) => {
    const cdb = confirmationsDb(trx);
    await expireDue(cdb, now, where);
    const latest = await cdb
      .selectFrom('compute.confirmations')
      .selectAll()
      .where('delegation_id', '=', call.delegationId)
      .where('method', '=', call.method)
      .where('input_digest', '=', digest)
      .where('tenant_id', '=', call.tenantId)
      .orderBy('seq', 'desc')
      .limit(1)
      .forUpdate()
      .executeTakeFirst();
    const state = latest ? stateAt(latest, now) : null;
    if (latest && state === 'approved')
      return { to: 'run' as const, ticket: { kind: 'run' as const, id: latest.id } };
    if (latest && state === 'consumed' && call.idempotent && typeof call.input.idempotencyKey === 'string')
      return { to: 'run' as const, ticket: { kind: 'replay-only' as const, id: latest.id } };
    if (latest && state === 'pending') return { to: 'ask' as const, row: latest };
    if (
      latest &&
      state === 'declined' &&
      now.getTime() - new Date(latest.created_at).getTime() < DECLINED_HOLDS_MS
    )
      return { to: 'declined' as const, row: latest };
    const row = await cdb
      .insertInto('compute.confirmations')
      .values({
        id: newId('confirmation'),
        tenant_id: call.tenantId,
        delegation_id: call.delegationId,
        agent_id: call.agentId,
        person_id: call.personId,
        method: call.method,
        action: call.action,
        resource: JSON.stringify({
          type: call.resource.type,
          ...(call.resource.id ? { id: call.resource.id } : {}),
        }),
        input_digest: digest,
        summary: summaryOf(call.method, call.input, call.secretInput),
        reason: call.reason,
        state: 'pending',
        created_at: now,
        expires_at: new Date(now.getTime() + CONFIRMATION_PENDING_SECONDS * 1000),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    await writeEvents(trx, [confirmationEvent('confirmation.requested', row)], {
      tenantId: call.tenantId,
      actor: call.agentId,
      requestId: call.requestId,
    });
    return { to: 'ask' as const, row };
  });
  if (outcome.to === 'run') return outcome.ticket;
  if (outcome.to === 'declined') {
    const row = outcome.row;
    throw new ComputeError(
      'ACCESS_DENIED',
      `${row.person_id} declined confirmation ${row.id}: this call does not run`,
      {
        details: { reason: 'confirmation-declined', confirmationId: row.id },
        hint: 'Do not retry it as it is; ask the person what they want instead.',
      },
    );
  }
  throw required(outcome.row);
}

/**
 * In the call's transaction, after it ran: spends its approved confirmation, so it commits or rolls
 * back with the call. Refused (and the call rolled back) when another call spent it, or it was
 * declined or ended meanwhile.
 */
export async function consume(
  trx: Kysely<ComputeTables>,
  ticket: ConfirmationTicket,
  now: Date,
): Promise<EventDraft> {
  const row = await confirmationsDb(trx)
    .updateTable('compute.confirmations')
    .set({ state: 'consumed', consumed_at: now })
    .where('id', '=', ticket.id)
    .where('state', '=', 'approved')
    .where('expires_at', '>', now)
    .returningAll()
    .executeTakeFirst();
  if (!row)
    throw new ComputeError(
      'CONFIRMATION_REQUIRED',
      `confirmation ${ticket.id} was used, declined or ended while this call ran; it did not run`,
      {
        details: { confirmationId: ticket.id },
        hint: 'Retry the call: it asks for a new confirmation if it needs one.',
      },
    );
  return confirmationEvent('confirmation.consumed', row);
}

/** The answer for a consumed confirmation whose kept answer is gone: a new key asks anew. */
export function spentConfirmation(ticket: ConfirmationTicket): ComputeError {
  return new ComputeError(
    'CONFIRMATION_REQUIRED',
    `confirmation ${ticket.id} was used already and this key's answer is no longer kept`,
    {
      details: { confirmationId: ticket.id },
      hint: 'Send the call with a new idempotency key: it asks the person for a new confirmation.',
    },
  );
}

/**
 * Ends (state `revoked`) the open confirmations of delegations IAM no longer counts: of the tenant,
 * or of one confirmation's delegation. IAM is asked outside any transaction.
 */
export async function endRevoked(
  db: Kysely<ComputeTables>,
  tenantId: string,
  confirmationId: string | undefined,
  delegationState: (delegationId: string) => Promise<'active' | 'expired' | 'revoked' | null>,
  now: Date,
): Promise<void> {
  let query = confirmationsDb(db)
    .selectFrom('compute.confirmations')
    .select('delegation_id')
    .distinct()
    .where('tenant_id', '=', tenantId)
    .where('state', 'in', ['pending', 'approved'])
    .limit(200);
  if (confirmationId !== undefined) query = query.where('id', '=', confirmationId);
  const ended: string[] = [];
  for (const { delegation_id } of await query.execute())
    if ((await delegationState(delegation_id)) !== 'active') ended.push(delegation_id);
  if (ended.length === 0) return;
  await confirmationsDb(db)
    .updateTable('compute.confirmations')
    .set({ state: 'revoked', decided_at: now })
    .where('tenant_id', '=', tenantId)
    .where('delegation_id', 'in', ended)
    .where('state', 'in', ['pending', 'approved'])
    .execute();
}
