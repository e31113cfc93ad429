/**
 * Usage: GPU-seconds per tenant, pool and GPU model in hour windows, from the GPU bindings (each
 * binding is `gpu_count` GPUs of one group from `bound_at` to `released_at`, or to now while it runs). A tenant sees its
 * own usage and every tenant's on the pools it owns.
 */
import { ComputeError } from '@better-compute/core';
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

export async function computeUsage(ctx: CallContext<UsageInput>): Promise<UsageRow[]> {
  const db = fleetDb(ctx.db);
  const now = ctx.now().getTime();
  const to = ctx.input.to ? Date.parse(ctx.input.to) : now;
  const from = Math.floor((ctx.input.from ? Date.parse(ctx.input.from) : to - 24 * HOUR) / HOUR) * HOUR;
  if (!(from < to))
    throw new ComputeError('INVALID_ARGUMENT', 'from must be before to', { details: { field: 'from' } });
  if ((to - from) / HOUR > MAX_WINDOWS)
    throw new ComputeError('INVALID_ARGUMENT', 'a usage query spans at most 93 days', {
      details: { field: 'from' },
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
  const sums = new Map<string, UsageRow & { ms: number }>();
  for (const row of rows) {
    const start = Math.max(new Date(row.bound_at).getTime(), from);
    const end = Math.min(row.released_at ? new Date(row.released_at).getTime() : now, to);
    for (let window = Math.floor(start / HOUR) * HOUR; window < end; window += HOUR) {
      const ms = Math.min(end, window + HOUR) - Math.max(start, window);
      if (ms <= 0) continue;
      const key = `${window}|${row.tenant_id}|${row.pool_id}|${row.model}`;
      const entry = sums.get(key) ?? {
        windowStart: new Date(window).toISOString(),
        windowEnd: new Date(window + HOUR).toISOString(),
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
    .sort(
      (a, b) =>
        cmp(a.windowStart, b.windowStart) ||
        cmp(a.tenantId, b.tenantId) ||
        cmp(a.poolId, b.poolId) ||
        cmp(a.gpuModel, b.gpuModel),
    );
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export async function listUsage(
  ctx: CallContext<UsageInput & { limit: number; cursor?: string | undefined }>,
) {
  const rows = await computeUsage(ctx);
  const offset = ctx.input.cursor ? Number(ctx.input.cursor) : 0;
  if (!Number.isInteger(offset) || offset < 0)
    throw new ComputeError('INVALID_ARGUMENT', 'cursor: must be a cursor from a previous page', {
      details: { field: 'cursor' },
    });
  const items = rows.slice(offset, offset + ctx.input.limit);
  return {
    items,
    nextCursor: offset + ctx.input.limit < rows.length ? String(offset + ctx.input.limit) : null,
  };
}

const COLUMNS = ['windowStart', 'windowEnd', 'tenantId', 'poolId', 'gpuModel', 'gpuSeconds'] as const;

/** A CSV field, quoted when it must be, and never read as a formula by a spreadsheet. */
function csvField(value: string | number): string {
  let text = String(value);
  if (/^[=+\-@\t\r]/.test(text) && typeof value === 'string') text = `'${text}`;
  return /[",\n\r]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

export async function exportUsage(ctx: CallContext<UsageInput & { format: 'csv' | 'jsonl' }>) {
  const rows = await computeUsage(ctx);
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
  };
}
