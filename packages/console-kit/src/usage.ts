/**
 * The Usage page's numbers: GPU-seconds per pool, per tenant and per hour window over a chosen period
 * (one pass, so a chart can switch between the two groupings without reading again), summed from
 * `usage.list` exactly as the API answers it (no rounding before the sum), so a chart drawn from
 * them shows the API's values. There is no aggregate method, so the rows of the period are read
 * page by page (500 a page) up to a cap, and a chart over more says it was cut short.
 */
import type { CallOutput, ComputeClient } from '@better-compute/client';

export type UsageRow = CallOutput<'usage.list'>['items'][number];

/** The most rows a chart reads (20 pages of 500); beyond it the chart says it is cut short. */
export const USAGE_CHART_MAX_ROWS = 10_000;
const USAGE_PAGE = 500;

export interface UsageWindow {
  /** ISO 8601 times as the API takes them; from inclusive, to exclusive. */
  from: string;
  to: string;
  poolId?: string | undefined;
}

export interface UsageSeriesWindow {
  windowStart: string;
  windowEnd: string;
  byPool: Record<string, number>;
  byTenant: Record<string, number>;
}

/** What a usage chart groups GPU-hours by. */
export type UsageGrouping = 'pool' | 'tenant';

export interface UsageSeries {
  /** The pools in the period, most GPU-seconds first, each with its total. */
  pools: { poolId: string; gpuSeconds: number }[];
  /** The tenants in the period (the reader's own, and others' on pools it owns), most first. */
  tenants: { tenantId: string; gpuSeconds: number }[];
  /** Each hour window in time order, with the GPU-seconds of each pool and of each tenant in it. */
  windows: UsageSeriesWindow[];
  /** Every pool's GPU-seconds together. */
  totalGpuSeconds: number;
  rows: number;
  /** True when the period held more than USAGE_CHART_MAX_ROWS rows: the sums are of the first ones. */
  cutShort: boolean;
}

/** GPU-seconds in GPU-hours, to two decimals (as `usage list` prints them). */
export const gpuHours = (gpuSeconds: number): number => Math.round((gpuSeconds / 3600) * 100) / 100;

const mostFirst = (sums: Map<string, number>) =>
  [...sums].sort(([a, x], [b, y]) => y - x || a.localeCompare(b));

/** Sums usage rows by pool, by tenant and by window (the pure half of `loadUsageSeries`). */
export function usageSeries(rows: readonly UsageRow[], cutShort = false): UsageSeries {
  const pools = new Map<string, number>();
  const tenants = new Map<string, number>();
  const windows = new Map<string, UsageSeriesWindow>();
  let total = 0;
  for (const row of rows) {
    pools.set(row.poolId, (pools.get(row.poolId) ?? 0) + row.gpuSeconds);
    tenants.set(row.tenantId, (tenants.get(row.tenantId) ?? 0) + row.gpuSeconds);
    let window = windows.get(row.windowStart);
    if (!window)
      windows.set(
        row.windowStart,
        (window = { windowStart: row.windowStart, windowEnd: row.windowEnd, byPool: {}, byTenant: {} }),
      );
    window.byPool[row.poolId] = (window.byPool[row.poolId] ?? 0) + row.gpuSeconds;
    window.byTenant[row.tenantId] = (window.byTenant[row.tenantId] ?? 0) + row.gpuSeconds;
    total += row.gpuSeconds;
  }
  return {
    pools: mostFirst(pools).map(([poolId, gpuSeconds]) => ({ poolId, gpuSeconds })),
    tenants: mostFirst(tenants).map(([tenantId, gpuSeconds]) => ({ tenantId, gpuSeconds })),
    windows: [...windows.values()].sort((a, b) => Date.parse(a.windowStart) - Date.parse(b.windowStart)),
    totalGpuSeconds: total,
    rows: rows.length,
    cutShort,
  };
}

/**
 * Reads the period's usage rows (up to USAGE_CHART_MAX_ROWS) and sums them by pool and window.
 *
 * @example
 * const series = await loadUsageSeries(client, 'acme', { from: '2026-01-01T00:00:00Z', to: '2026-01-02T00:00:00Z' });
 * series.pools; // [{ poolId: 'pool_…', gpuSeconds: 86400 }]
 */
export async function loadUsageSeries(
  client: ComputeClient,
  tenantId: string,
  window: UsageWindow,
): Promise<UsageSeries> {
  const rows: UsageRow[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.call('usage.list', {
      tenantId,
      from: window.from,
      to: window.to,
      limit: USAGE_PAGE,
      ...(window.poolId ? { poolId: window.poolId } : {}),
      ...(cursor ? { cursor } : {}),
    });
    rows.push(...page.items);
    cursor = page.nextCursor ?? undefined;
  } while (cursor && rows.length < USAGE_CHART_MAX_ROWS);
  return usageSeries(
    rows.slice(0, USAGE_CHART_MAX_ROWS),
    Boolean(cursor) || rows.length > USAGE_CHART_MAX_ROWS,
  );
}

/**
 * One grouping of a series, as a chart draws it: each group's key and total (most first), and each
 * window's GPU-seconds by that key.
 *
 * @example
 * const byTenant = seriesGroups(series, 'tenant');
 * byTenant.groups; // [{ key: 'acme', gpuSeconds: 7200 }, { key: 'root', gpuSeconds: 60 }]
 */
export function seriesGroups(
  series: UsageSeries,
  grouping: UsageGrouping,
): {
  groups: { key: string; gpuSeconds: number }[];
  windows: { windowStart: string; windowEnd: string; byGroup: Record<string, number> }[];
} {
  const byPool = grouping === 'pool';
  return {
    groups: byPool
      ? series.pools.map((pool) => ({ key: pool.poolId, gpuSeconds: pool.gpuSeconds }))
      : series.tenants.map((tenant) => ({ key: tenant.tenantId, gpuSeconds: tenant.gpuSeconds })),
    windows: series.windows.map((window) => ({
      windowStart: window.windowStart,
      windowEnd: window.windowEnd,
      byGroup: byPool ? window.byPool : window.byTenant,
    })),
  };
}

/** The file name a CSV export of the period is saved as: `usage-2026-01-01T00-00Z-2026-01-02T00-00Z.csv`. */
export function usageExportName(window: UsageWindow, format: 'csv' | 'jsonl' = 'csv'): string {
  const stamp = (time: string) => time.replace(/:\d\d(\.\d+)?(?=Z|[+-])/, '').replace(/:/g, '-');
  return `usage-${stamp(window.from)}-${stamp(window.to)}${window.poolId ? `-${window.poolId}` : ''}.${format}`;
}
