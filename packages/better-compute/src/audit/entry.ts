/**
 * An audit entry as the Merkle tree sees it: its canonical serialisation (the leaf's bytes) and how
 * to read it from `compute.audit_events` so the serialisation is the same every time.
 *
 * The canonical form is the UTF-8 bytes of a JSON object with exactly these keys in this order,
 * without whitespace, each value a string or null as `JSON.stringify` writes it:
 * `v` (the format, 1), `id`, `tenant`, `actor`, `actorKind`, `action`, `method`, `resourceType`,
 * `resourceId`, `outcome`, `errorCode`, `requestId`, `occurredAt` (UTC, microseconds:
 * `2026-12-04T05:49:41.123456Z`). docs/audit.md describes it for anyone checking a proof by hand.
 */
import { sql, type RawBuilder } from 'kysely';
import { leafHash, type Hash } from './merkle.js';

export interface AuditEntry {
  id: string;
  tenant: string;
  actor: string | null;
  actorKind: string | null;
  action: string;
  method: string;
  resourceType: string;
  resourceId: string | null;
  outcome: string;
  errorCode: string | null;
  requestId: string;
  occurredAt: string;
}

const KEYS = [
  'id',
  'tenant',
  'actor',
  'actorKind',
  'action',
  'method',
  'resourceType',
  'resourceId',
  'outcome',
  'errorCode',
  'requestId',
  'occurredAt',
] as const;
const NULLABLE = new Set<string>(['actor', 'actorKind', 'resourceId', 'errorCode']);

function canonicalEntry(entry: AuditEntry): string {
  const ordered: Record<string, unknown> = { v: 1 };
  for (const key of KEYS) ordered[key] = entry[key];
  return JSON.stringify(ordered);
}

export function entryLeafHash(entry: AuditEntry): Hash {
  return leafHash(Buffer.from(canonicalEntry(entry), 'utf8'));
}

/** An entry from untrusted JSON (a proof file), or a reason it is not one. */
export function parseEntry(value: unknown): AuditEntry | { error: string } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { error: 'the entry is not an object' };
  }
  const record = value as Record<string, unknown>;
  const entry: Record<string, string | null> = {};
  for (const key of KEYS) {
    const field = record[key];
    if (field === null && NULLABLE.has(key)) entry[key] = null;
    else if (typeof field === 'string') entry[key] = field;
    else return { error: `the entry's ${key} is ${field === undefined ? 'missing' : 'not a string'}` };
  }
  const extra = Object.keys(record).filter(
    (key) => key !== 'v' && !(KEYS as readonly string[]).includes(key),
  );
  if (extra.length > 0) return { error: `the entry has unknown fields: ${extra.join(', ')}` };
  if (record.v !== undefined && record.v !== 1) return { error: 'the entry is not of format 1' };
  return entry as unknown as AuditEntry;
}

/** The row shape `entrySelection` reads. */
export interface AuditEntryRow {
  id: string;
  tenant_id: string;
  actor: string | null;
  actor_kind: string | null;
  action: string;
  method: string;
  resource_type: string;
  resource_id: string | null;
  outcome: string;
  error_code: string | null;
  request_id: string;
  occurred_at_utc: string;
}

/** The time in the canonical form, computed by PostgreSQL so no precision is lost on the way. */
export const occurredAtUtc: RawBuilder<string> = sql<string>`to_char(occurred_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

export function entryFromRow(row: AuditEntryRow): AuditEntry {
  return {
    id: row.id,
    tenant: row.tenant_id,
    actor: row.actor,
    actorKind: row.actor_kind,
    action: row.action,
    method: row.method,
    resourceType: row.resource_type,
    resourceId: row.resource_id,
    outcome: row.outcome,
    errorCode: row.error_code,
    requestId: row.request_id,
    occurredAt: row.occurred_at_utc,
  };
}
