/**
 * Writes what a call did: its events (the outbox) and its audit entry, in the transaction of the
 * change itself, so a failure anywhere writes none of them.
 */
import { newId } from '@better-compute/core';
import { sentWithCommit } from '@better-compute/db';
import { CompiledQuery, type Kysely } from 'kysely';
import type { EventDraft } from '../modules/define-module.js';
import type { ComputeTables } from './tables.js';

export interface AuditDraft {
  tenantId: string;
  actor: string | null;
  actorKind: string | null;
  action: string;
  method: string;
  resource: { type: string; id?: string | undefined };
  outcome: 'allowed' | 'denied' | 'failed';
  errorCode?: string | undefined;
  requestId: string;
}

/** An idempotency key a new call keeps (http/idempotency.ts), written with its answer. */
export interface NewIdempotencyKey {
  /** SHA-256 of the key's scope (tenant, principal, method, key). */
  scopeHash: Buffer;
  tenantId: string;
  method: string;
  /** SHA-256 of the call's input without its key. */
  inputHash: Buffer;
  expiresAt: Date;
}

export interface EventMeta {
  tenantId: string;
  actor: string | null;
  requestId: string;
}

export async function writeEvents(
  db: Kysely<ComputeTables>,
  events: readonly EventDraft[],
  meta: EventMeta,
): Promise<void> {
  if (events.length === 0) return;
  await recordMutation(db, { events, meta });
}

export async function writeAudit(db: Kysely<ComputeTables>, entry: AuditDraft): Promise<void> {
  await recordMutation(db, { events: [], meta: entry, audit: entry });
}

/**
 * Everything a mutation writes besides its change (its events, its audit entry, the answer its
 * idempotency key keeps) in one round trip: the writes go out as one statement of data-modifying
 * CTEs, which commit or roll back with the transaction like any other. Every call runs it, so its
 * text is written here, once per shape, rather than built and compiled per call.
 */
export async function recordMutation(
  trx: Kysely<ComputeTables>,
  parts: {
    events: readonly EventDraft[];
    meta: EventMeta;
    audit?: AuditDraft | undefined;
    /** The key and its answer as stored (http/idempotency.ts packs it). */
    idempotency?: (NewIdempotencyKey & { answer: Buffer }) | undefined;
  },
): Promise<void> {
  const { meta, audit, idempotency } = parts;
  let { events } = parts;
  if (events.length === 0 && !audit && !idempotency) return;
  // A statement takes at most 65,535 parameters: a call that tells thousands of events (a fleet
  // apply) writes them in statements of EVENTS_PER_STATEMENT, numbered on within its transaction.
  let first = 0;
  while (events.length > EVENTS_PER_STATEMENT) {
    await recordEvents(trx, events.slice(0, EVENTS_PER_STATEMENT), meta, first);
    first += EVENTS_PER_STATEMENT;
    events = events.slice(EVENTS_PER_STATEMENT);
  }
  const values = eventValues(events, meta, first);
  if (audit) {
    values.push(
      newId('audit'),
      audit.tenantId,
      audit.actor,
      audit.actorKind,
      audit.action,
      audit.method,
      audit.resource.type,
      audit.resource.id ?? null,
      audit.outcome,
      audit.errorCode ?? null,
      audit.requestId,
    );
  }
  if (idempotency) {
    values.push(
      idempotency.scopeHash,
      idempotency.tenantId,
      idempotency.method,
      idempotency.inputHash,
      idempotency.answer,
      idempotency.expiresAt,
    );
  }
  const text = recordText(events.length, Boolean(audit), Boolean(idempotency));
  // Nothing reads its result, so on PostgreSQL it travels with the commit (no round trip of its own).
  await trx.executeQuery(CompiledQuery.raw(sentWithCommit(text), values));
}

/** Events per statement: nine parameters each, well under PostgreSQL's 65,535. */
const EVENTS_PER_STATEMENT = 5000;

function eventValues(events: readonly EventDraft[], meta: EventMeta, first: number): unknown[] {
  const values: unknown[] = [];
  for (const [index, event] of events.entries()) {
    values.push(
      newId('event'),
      first + index,
      event.tenantId ?? meta.tenantId,
      event.type,
      event.subject.type,
      event.subject.id,
      JSON.stringify(event.data ?? {}),
      meta.actor,
      meta.requestId,
    );
  }
  return values;
}

async function recordEvents(
  trx: Kysely<ComputeTables>,
  events: readonly EventDraft[],
  meta: EventMeta,
  first: number,
): Promise<void> {
  const text = recordText(events.length, false, false);
  await trx.executeQuery(CompiledQuery.raw(sentWithCommit(text), eventValues(events, meta, first)));
}

const EVENT_COLUMNS = 'id, tx_index, tenant_id, type, subject_type, subject_id, data, actor, request_id';
const AUDIT_COLUMNS =
  'id, tenant_id, actor, actor_kind, action, method, resource_type, resource_id, outcome, error_code, request_id';
const KEY_COLUMNS = 'scope_hash, tenant_id, method, input_hash, answer, expires_at';
const recordTexts = new Map<string, string>();

/** The statement for a shape of record: `events` rows, an audit entry or not, a kept answer or not. */
function recordText(events: number, audit: boolean, idempotency: boolean): string {
  const shape = `${events}:${audit}:${idempotency}`;
  let text = recordTexts.get(shape);
  if (text !== undefined) return text;
  let next = 1;
  const row = (columns: number) => `(${Array.from({ length: columns }, () => `$${next++}`).join(', ')})`;
  const writes: string[] = [];
  if (events > 0) {
    const rows = Array.from({ length: events }, () => row(9)).join(', ');
    writes.push(`insert into compute.events (${EVENT_COLUMNS}) values ${rows}`);
  }
  if (audit) writes.push(`insert into compute.audit_events (${AUDIT_COLUMNS}) values ${row(11)}`);
  if (idempotency) writes.push(`insert into compute.idempotency_keys (${KEY_COLUMNS}) values ${row(6)}`);
  const last = writes.pop()!;
  text =
    writes.length === 0 ? last : `with ${writes.map((w, i) => `write_${i} as (${w})`).join(', ')} ${last}`;
  // The shapes are few (a call tells a handful of events), but nothing here should grow unbounded.
  if (recordTexts.size < 1000) recordTexts.set(shape, text);
  return text;
}
