/** Small helpers the fleet's services share: times, versions, labels, pages, secrets. */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { ComputeError } from '@better-compute/core';
import { MAX_LABELS } from '@better-compute/core/methods';

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

/**
 * INVALID_ARGUMENT when a call both sets and removes one key. Which wins was a matter of the order
 * the service happened to apply them in (labels: remove, taints: add), so neither is guessed.
 */
export function refuseSetAndRemoved(
  what: 'label' | 'taint',
  set: readonly string[],
  remove: readonly string[],
  field: string,
  hint: string,
): void {
  const removing = new Set(remove);
  const key = set.find((k) => removing.has(k));
  if (key === undefined) return;
  throw new ComputeError(
    'INVALID_ARGUMENT',
    `${what} ${key} is both ${what === 'taint' ? 'added' : 'set'} and removed in one call`,
    { details: { field, key }, hint },
  );
}

/**
 * INVALID_ARGUMENT when a resource would carry more than MAX_LABELS labels after a change. One that
 * carries more from before the cap (nodes took any number) may still change without growing, so it
 * can be brought under it.
 */
export function checkLabelCount(labels: Record<string, string>, before: number, field: string): void {
  const count = Object.keys(labels).length;
  if (count > MAX_LABELS && count > before)
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `a site, pool or node carries at most ${MAX_LABELS} labels; this change would leave it ${count}`,
      {
        details: { field, limit: MAX_LABELS, count },
        hint: 'Remove labels it no longer needs (in the same call, or first), or put fewer keys on it.',
      },
    );
}

/**
 * The labels after an update, sorted by key: `labels` replace them when given (or, with `merge`,
 * are set over them), then the `remove` keys go. A key both given and removed, and a result over
 * MAX_LABELS, are refused (sites, pools and nodes alike).
 */
export function nextLabels(
  current: Record<string, string>,
  labels: Record<string, string> | undefined,
  remove: readonly string[] | undefined,
  options: { merge?: boolean; fields?: { set: string; remove: string } } = {},
): Record<string, string> {
  const fields = options.fields ?? { set: 'labels', remove: 'removeLabels' };
  refuseSetAndRemoved(
    'label',
    Object.keys(labels ?? {}),
    remove ?? [],
    fields.remove,
    options.merge
      ? 'Set a label or remove it, not both: to change its value, set it alone.'
      : 'Give the key in the labels or in the keys to remove, not both: the labels given replace them all, so one left out of them is removed too (--label replaces, --remove-label KEY removes one).',
  );
  const next = options.merge ? { ...current, ...labels } : { ...(labels ?? current) };
  for (const key of remove ?? []) delete next[key];
  checkLabelCount(next, Object.keys(current).length, fields.set);
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
