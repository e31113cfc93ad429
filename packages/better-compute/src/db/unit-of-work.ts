/**
 * Writes what a call did: its events (the outbox) and its audit entry, in the transaction of the
 * change itself, so a failure anywhere writes none of them.
 */
import { newId } from '@better-compute/core';
import { type Compilable, type Kysely, sql } from 'kysely';
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
  await insertEvents(db, events, meta).execute();
}

export async function writeAudit(db: Kysely<ComputeTables>, entry: AuditDraft): Promise<void> {
  await insertAudit(db, entry).execute();
}

/**
 * Everything a mutation writes besides its change (its events, its audit entry, the answer its
 * idempotency key keeps) in one round trip: the writes go out as one statement of data-modifying
 * CTEs, which commit or roll back with the transaction like any other.
 */
export async function recordMutation(
  trx: Kysely<ComputeTables>,
  parts: {
    events: readonly EventDraft[];
    meta: EventMeta;
    audit?: AuditDraft | undefined;
    idempotency?: { scopeHash: string; response: unknown } | undefined;
  },
): Promise<void> {
  const writes: Compilable[] = [];
  if (parts.events.length > 0) writes.push(insertEvents(trx, parts.events, parts.meta));
  if (parts.audit) writes.push(insertAudit(trx, parts.audit));
  if (parts.idempotency) {
    writes.push(
      trx
        .updateTable('compute.idempotency_keys')
        .set({ response: JSON.stringify(parts.idempotency.response ?? null) })
        .where('scope_hash', '=', parts.idempotency.scopeHash),
    );
  }
  const last = writes.pop();
  if (!last) return;
  if (writes.length === 0) {
    await trx.executeQuery(last.compile());
    return;
  }
  // Raw SQL: Kysely has no builder for a WITH of inserts and updates; the parts are its own builders.
  const ctes = sql.join(
    writes.map((write, index) => sql`${sql.raw(`write_${index}`)} as (${write})`),
    sql`, `,
  );
  await sql`with ${ctes} ${last}`.execute(trx);
}

function insertEvents(db: Kysely<ComputeTables>, events: readonly EventDraft[], meta: EventMeta) {
  return db.insertInto('compute.events').values(
    events.map((event, index) => ({
      id: newId('event'),
      tx_index: index,
      tenant_id: event.tenantId ?? meta.tenantId,
      type: event.type,
      subject_type: event.subject.type,
      subject_id: event.subject.id,
      data: JSON.stringify(event.data ?? {}),
      actor: meta.actor,
      request_id: meta.requestId,
    })),
  );
}

function insertAudit(db: Kysely<ComputeTables>, entry: AuditDraft) {
  return db.insertInto('compute.audit_events').values({
    id: newId('audit'),
    tenant_id: entry.tenantId,
    actor: entry.actor,
    actor_kind: entry.actorKind,
    action: entry.action,
    method: entry.method,
    resource_type: entry.resource.type,
    resource_id: entry.resource.id ?? null,
    outcome: entry.outcome,
    error_code: entry.errorCode ?? null,
    request_id: entry.requestId,
  });
}
