/** Small helpers the fleet's services share: times, versions, labels, pages, secrets. */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { ComputeError } from '@better-compute/core';

export function iso(value: Date | string): string {
  return new Date(value).toISOString();
}

export function isoOrNull(value: Date | string | null | undefined): string | null {
  return value === null || value === undefined ? null : iso(value);
}

/** CONFLICT when `ifVersion` is given and the resource moved past it. */
export function checkVersion(kind: string, id: string, current: number, ifVersion: number | undefined): void {
  if (ifVersion !== undefined && ifVersion !== current) {
    throw new ComputeError('CONFLICT', `${kind} ${id} is at version ${current}, not ${ifVersion}`, {
      details: { id, version: current, ifVersion },
      hint: `Read the ${kind} again and retry with --if-version ${current}.`,
    });
  }
}

/** The labels after an update: `labels` replace them when given, then the `remove` keys go; sorted by key. */
export function nextLabels(
  current: Record<string, string>,
  labels: Record<string, string> | undefined,
  remove: readonly string[] | undefined,
): Record<string, string> {
  const next = { ...(labels ?? current) };
  for (const key of remove ?? []) delete next[key];
  return Object.fromEntries(Object.entries(next).sort(([a], [b]) => (a < b ? -1 : 1)));
}

/** Whether two label records hold the same keys and values: an update to the same is no change. */
export function sameLabels(a: Record<string, string>, b: Record<string, string>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => b[key] === a[key]);
}

export function notFound(kind: string, id: string): ComputeError {
  return new ComputeError('NOT_FOUND', `${kind} ${id} does not exist`, { details: { id } });
}

export function invalidState(
  message: string,
  details: Record<string, unknown> = {},
  hint?: string,
): ComputeError {
  return new ComputeError('INVALID_STATE', message, hint ? { details, hint } : { details });
}

/** A page of rows fetched with `limit + 1`; the cursor is the last row's id. */
export function pageOfRows<Row extends { id: string }, Item>(
  rows: Row[],
  limit: number,
  map: (row: Row) => Item,
) {
  const page = rows.slice(0, limit);
  return { items: page.map(map), nextCursor: rows.length > limit ? (page.at(-1)?.id ?? null) : null };
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** 32 random bytes, base64url. */
export function newSecret(): string {
  return randomBytes(32).toString('base64url');
}

/** Constant-time comparison of a presented secret with a stored SHA-256 hex digest. */
export function secretMatches(presented: string, storedHash: string | null): boolean {
  const expected = Buffer.from(storedHash ?? '0'.repeat(64), 'hex');
  const actual = createHash('sha256').update(presented).digest();
  return expected.length === actual.length && timingSafeEqual(expected, actual) && storedHash !== null;
}

/** `jtok_….SECRET` → its id and secret; null when it is not shaped so. */
export function splitToken(token: string, prefix: string): { id: string; secret: string } | null {
  const dot = token.indexOf('.');
  if (dot < 0) return null;
  const id = token.slice(0, dot);
  const secret = token.slice(dot + 1);
  if (!id.startsWith(`${prefix}_`) || secret.length < 20) return null;
  return { id, secret };
}
