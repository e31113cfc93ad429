/**
 * Writes what a call did: its events (the outbox) and its audit entry, in the transaction of the
 * change itself, so a failure anywhere writes none of them.
 */
import { newId } from '@better-compute/core';
import type { Kysely } from 'kysely';
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

export async function writeEvents(
  db: Kysely<ComputeTables>,
  events: readonly EventDraft[],
  meta: { tenantId: string; actor: string | null; requestId: string },
): Promise<void> {
  if (events.length === 0) return;
  await db
    .insertInto('compute.events')
    .values(
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
    )
    .execute();
}

export async function writeAudit(db: Kysely<ComputeTables>, entry: AuditDraft): Promise<void> {
  await db
    .insertInto('compute.audit_events')
    .values({
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
    })
    .execute();
}
