/**
 * Usage: GPU-seconds per tenant, pool and GPU model in hour windows, from the GPU bindings (each
 * binding is `gpu_count` GPUs of one group from `bound_at` to `released_at`, or to now while it runs). A tenant sees its
 * own usage and every tenant's on the pools it owns.
 *
 * Both bounds are used as given: a row's window is its hour clipped to [from, to), and
 * windowStart and windowEnd say the clipped bounds (docs/decisions/usage-paging.md).
 */
import { ComputeError, isId, isTenantId } from '@better-compute/core';
import { USAGE_METERS } from '@better-compute/core/methods';
import type { CallContext } from '../define-module.js';
import { fleetDb } from './tables.js';

const HOUR = 3_600_000;
const MAX_WINDOWS = 24 * 93;

export interface UsageRow {
  windowStart: string;
  windowEnd: string;
  tenantId: string;
  poolId: string;
  gpuModel: string;
  gpuSeconds: number;
}

type UsageInput = { poolId?: string | undefined; from?: string | undefined; to?: string | undefined };

/** A row with its place in the list's order: the hour it falls in, then tenant, pool and model. */
interface KeyedRow extends UsageRow {
  hour: number;
}

/** The usage rows of [from, to), in the list's order. */
async function computeUsage(ctx: CallContext<UsageInput>): Promise<KeyedRow[]> {
  const db = fleetDb(ctx.db);
  const now = ctx.now().getTime();
  const to = ctx.input.to ? Date.parse(ctx.input.to) : now;
  const from = ctx.input.from ? Date.parse(ctx.input.from) : to - 24 * HOUR;
  if (!(from < to))
    throw new ComputeError('INVALID_ARGUMENT', 'from must be before to', {
      details: { field: 'from' },
      hint: 'Pass --from a time earlier than --to (--to is exclusive; the default --to is now).',
    });
  if ((to - from) / HOUR > MAX_WINDOWS)
    throw new ComputeError('INVALID_ARGUMENT', 'a usage query spans at most 93 days', {
      details: { field: 'from' },
      hint: 'Ask for 93 days or less at a time: one query per period.',
    });
  let query = db
    .selectFrom('compute.gpu_bindings as b')
    .select(['b.tenant_id', 'b.pool_id', 'b.model', 'b.gpu_count', 'b.bound_at', 'b.released_at'])
    .where('b.bound_at', '<', new Date(to))
    .where((eb) => eb.or([eb('b.released_at', 'is', null), eb('b.released_at', '>', new Date(from))]))
    .where((eb) =>
      eb.or([
        eb('b.tenant_id', '=', ctx.tenantId),
        eb(
          'b.pool_id',
          'in',
          eb.selectFrom('compute.pools as p').select('p.id').where('p.tenant_id', '=', ctx.tenantId),
        ),
      ]),
    );
  if (ctx.input.poolId) query = query.where('b.pool_id', '=', ctx.input.poolId);
  const rows = await query.execute();
  const sums = new Map<string, KeyedRow & { ms: number }>();
  for (const row of rows) {
    const start = Math.max(new Date(row.bound_at).getTime(), from);
    const end = Math.min(row.released_at ? new Date(row.released_at).getTime() : now, to);
    for (let window = Math.floor(start / HOUR) * HOUR; window < end; window += HOUR) {
      const ms = Math.min(end, window + HOUR) - Math.max(start, window);
      if (ms <= 0) continue;
      const key = `${window}|${row.tenant_id}|${row.pool_id}|${row.model}`;
      const entry = sums.get(key) ?? {
        hour: window / HOUR,
        // The hour clipped to [from, to): a window cut short by a bound says so.
        windowStart: new Date(Math.max(window, from)).toISOString(),
        windowEnd: new Date(Math.min(window + HOUR, to)).toISOString(),
        tenantId: row.tenant_id,
        poolId: row.pool_id,
        gpuModel: row.model,
        gpuSeconds: 0,
        ms: 0,
      };
      entry.ms += ms * row.gpu_count;
      sums.set(key, entry);
    }
  }
  return [...sums.values()]
    .map(({ ms, ...row }) => ({ ...row, gpuSeconds: Math.round(ms / 1000) }))
    .filter((row) => row.gpuSeconds > 0)
    .sort(compareRows);
}

/** The list's order, which its cursor is a position in. */
function compareRows(a: UsageKey, b: UsageKey): number {
  return (
    a.hour - b.hour || cmp(a.tenantId, b.tenantId) || cmp(a.poolId, b.poolId) || cmp(a.gpuModel, b.gpuModel)
  );
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

type UsageKey = Pick<KeyedRow, 'hour' | 'tenantId' | 'poolId' | 'gpuModel'>;

/**
 * A cursor is the sort key of the last row of a page, opaque to callers. It names the hour rather
 * than windowStart, so a page read after the default --from has moved on within the first hour
 * still starts after the same row.
 */
function encodeCursor(row: UsageKey): string {
  return Buffer.from(JSON.stringify([row.hour, row.tenantId, row.poolId, row.gpuModel])).toString(
    'base64url',
  );
}

const MAX_CURSOR = 400;

function decodeCursor(cursor: string): UsageKey {
  const key = parseCursor(cursor);
  if (!key)
    throw new ComputeError('INVALID_ARGUMENT', 'cursor: must be a cursor from a previous page', {
      details: { field: 'cursor' },
      hint: 'Pass the cursor a previous page of usage list ended with, or leave it out for the first page.',
    });
  return key;
}

function parseCursor(cursor: string): UsageKey | undefined {
  // Only what encodeCursor gives: base64url that encodes back to itself, so no other spelling passes.
  if (cursor.length > MAX_CURSOR || !/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined;
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  if (Buffer.from(text).toString('base64url') !== cursor) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(value) || value.length !== 4) return undefined;
  const [hour, tenantId, poolId, gpuModel] = value as unknown[];
  if (!Number.isSafeInteger(hour) || !isTenantId(tenantId) || !isId('pool', poolId)) return undefined;
  if (typeof gpuModel !== 'string' || gpuModel === '') return undefined;
  return { hour: hour as number, tenantId, poolId, gpuModel };
}

/**
 * A page of usage rows. Paging is by key, not by offset: a page after a cursor starts strictly
 * after the row the cursor names, so rows that appear or go between pages never repeat or shift
 * rows over the page boundary.
 */
export async function listUsage(
  ctx: CallContext<UsageInput & { limit: number; cursor?: string | undefined }>,
) {
  // Checked before anything is read, as every list does (docs/decisions/list-cursors.md).
  const after = ctx.input.cursor ? decodeCursor(ctx.input.cursor) : undefined;
  const rows = await computeUsage(ctx);
  const rest = after ? rows.filter((row) => compareRows(row, after) > 0) : rows;
  const page = rest.slice(0, ctx.input.limit);
  const last = page.at(-1);
  return {
    items: page.map(withoutKey),
    nextCursor: rest.length > page.length && last ? encodeCursor(last) : null,
  };
}

function withoutKey({ hour: _hour, ...row }: KeyedRow): UsageRow {
  return row;
}

const COLUMNS = ['windowStart', 'windowEnd', 'tenantId', 'poolId', 'gpuModel', 'gpuSeconds'] as const;

/** A CSV field, quoted when it must be, and never read as a formula by a spreadsheet. */
function csvField(value: string | number): string {
  let text = String(value);
  if (/^[=+\-@\t\r]/.test(text) && typeof value === 'string') text = `'${text}`;
  return /[",\n\r]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** Every row of the period, in the list's order; there is no paging. */
export async function exportUsage(ctx: CallContext<UsageInput & { format: 'csv' | 'jsonl' }>) {
  const rows = (await computeUsage(ctx)).map(withoutKey);
  const content =
    ctx.input.format === 'csv'
      ? [COLUMNS.join(','), ...rows.map((row) => COLUMNS.map((c) => csvField(row[c])).join(','))].join('\n') +
        '\n'
      : rows.map((row) => JSON.stringify(row)).join('\n') + (rows.length ? '\n' : '');
  return {
    format: ctx.input.format,
    contentType: ctx.input.format === 'csv' ? 'text/csv' : 'application/x-ndjson',
    rows: rows.length,
    content,
    meter: USAGE_METERS[0].name,
  };
}
