/**
 * Reading the outbox. A reader sees only events of transactions older than the oldest one still
 * running (the snapshot's xmin): everything below it has committed or aborted for good, so a page
 * never skips an event that commits late with a lower position, and never shows one twice.
 */
import { formatListCursor, parsePosition } from '@better-compute/core';
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { SETTLED_HORIZON } from '../../db/settled.js';

export interface EventRecord {
  id: string;
  position: string;
  type: string;
  tenantId: string;
  subject: { type: string; id: string | null };
  data: Record<string, unknown>;
  actor: string | null;
  requestId: string | null;
  occurredAt: string;
}

export interface ListEventsOptions {
  tenantId: string;
  type?: string | undefined;
  /** Only the events about one resource (a node's, say). */
  subject?: { type: string; id: string } | undefined;
  limit: number;
  cursor?: string | undefined;
  /**
   * Also say whether committed events wait behind the snapshot's xmin (`held`): the live stream
   * then looks again shortly, instead of waiting for the next notification.
   */
  reportHeld?: boolean | undefined;
}

/** A type pattern of events.list (`reservation.created`, `reservation.`, `reservation.*`) as a test. */
export function typeMatcher(type: string): (eventType: string) => boolean {
  const filter = typeFilter(type);
  return 'exact' in filter
    ? (eventType) => eventType === filter.exact
    : (eventType) => eventType.startsWith(filter.prefix);
}

/**
 * `reservation.` and `reservation.*` match a prefix; anything else one type exactly. events.list's
 * input schema has already refused every other form (a `*` elsewhere, an empty type).
 */
function typeFilter(type: string): { prefix: string } | { exact: string } {
  if (type.endsWith('.*')) return { prefix: type.slice(0, -1) };
  if (type.endsWith('.')) return { prefix: type };
  return { exact: type };
}

export async function listEvents(
  db: Kysely<ComputeTables>,
  options: ListEventsOptions,
): Promise<{ items: EventRecord[]; nextCursor: string | null; held?: boolean }> {
  const after = options.cursor ? parsePosition(options.cursor, 'list', 'cursor') : undefined;
  let query = db
    .selectFrom('compute.events')
    .select([
      'id',
      sql<string>`tx_id::text`.as('tx'),
      'tx_index',
      'type',
      'tenant_id',
      'subject_type',
      'subject_id',
      'data',
      'actor',
      'request_id',
      'occurred_at',
      // Raw SQL: Kysely has no builder for snapshot functions or xid8 row comparisons.
      sql<boolean>`tx_id < ${SETTLED_HORIZON}`.as('settled'),
    ])
    .where('tenant_id', '=', options.tenantId);
  if (!options.reportHeld) query = query.where(sql<boolean>`tx_id < ${SETTLED_HORIZON}`);
  if (after) query = query.where(sql<boolean>`(tx_id, tx_index) > (${after.tx}::xid8, ${after.index})`);
  if (options.subject) {
    query = query
      .where('subject_type', '=', options.subject.type)
      .where('subject_id', '=', options.subject.id);
  }
  if (options.type) {
    const filter = typeFilter(options.type);
    query =
      'exact' in filter
        ? query.where('type', '=', filter.exact)
        : query.where(sql<boolean>`starts_with(type, ${filter.prefix})`);
  }
  const rows = await query
    .orderBy('tx_id')
    .orderBy('tx_index')
    .limit(options.limit + 1)
    .execute();
  // Rows come in position order, so the settled ones (below xmin) are a prefix of them.
  const unsettled = rows.findIndex((row) => !row.settled);
  const settled = unsettled === -1 ? rows : rows.slice(0, unsettled);
  const page = settled.slice(0, options.limit);
  const items = page.map((row): EventRecord => ({
    id: row.id,
    position: formatListCursor({ tx: row.tx, index: row.tx_index }),
    type: row.type,
    tenantId: row.tenant_id,
    subject: { type: row.subject_type, id: row.subject_id },
    data: row.data,
    actor: row.actor,
    requestId: row.request_id,
    occurredAt: new Date(row.occurred_at).toISOString(),
  }));
  const last = items.at(-1);
  const nextCursor = settled.length > options.limit && last ? last.position : null;
  return options.reportHeld ? { items, nextCursor, held: unsettled !== -1 } : { items, nextCursor };
}
