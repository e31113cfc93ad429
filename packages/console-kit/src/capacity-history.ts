/**
 * A pool's capacity over time, from what the API already answers: `usage.list`'s GPU-seconds per
 * hour window (summed as `loadUsageSeries` sums them, every tenant's the reader may see) give the
 * GPUs reserved on average in each hour, and `capacity.get` gives the pool's GPUs now. The API keeps
 * no history of a pool's size, so free is drawn against today's total and unavailable GPUs (what a
 * chart says in its caption). Pure but for the loader; no framework.
 */
import type { ComputeClient } from '@better-compute/client';
import { loadUsageSeries, type UsageSeries } from './usage.js';

const HOUR = 3_600_000;

/** The periods a capacity chart offers, in hours. */
export const CAPACITY_PERIODS = [24, 24 * 7, 24 * 30] as const;

/** The pool's GPUs now, as `capacity.get` counts them. */
export interface CapacityNow {
  poolId: string;
  name: string;
  total: number;
  reserved: number;
  unavailable: number;
}

export interface CapacityPoint {
  /** The hour window, as usage rows name it. */
  windowStart: string;
  windowEnd: string;
  /** The part of the window that has passed (3600 but for the current hour). */
  seconds: number;
  /** GPU-seconds reserved in the window, the sum of usage.list's rows for the pool. */
  gpuSeconds: number;
  /** GPUs reserved on average over the part of the window that has passed, to two decimals. */
  reservedGpus: number;
  /** GPUs free on average against today's total and unavailable GPUs, never below 0. */
  freeGpus: number;
}

export interface CapacityHistory {
  pool: CapacityNow;
  from: string;
  to: string;
  /** One point per hour of the period up to now, in time order (hours without usage reserve 0). */
  points: CapacityPoint[];
  /** True when usage had more rows than a chart reads: the sums are of the first ones. */
  cutShort: boolean;
}

const twoDecimals = (value: number) => Math.round(value * 100) / 100;

/**
 * Each hour of `[from, to)` that has begun by `now`, with the pool's reserved GPU-seconds from
 * `series` and the GPUs reserved and free on average.
 *
 * @example
 * const points = capacityPoints(series, pool, from, to, Date.now());
 * points[0]; // { windowStart: '2026-01-01T00:00:00.000Z', gpuSeconds: 7200, reservedGpus: 2, freeGpus: 6, … }
 */
export function capacityPoints(
  series: UsageSeries,
  pool: CapacityNow,
  from: string,
  to: string,
  now: number,
): CapacityPoint[] {
  const byWindow = new Map(
    series.windows.map((w) => [Date.parse(w.windowStart), w.byPool[pool.poolId] ?? 0]),
  );
  const points: CapacityPoint[] = [];
  const first = Math.floor(Date.parse(from) / HOUR) * HOUR;
  const end = Math.min(Date.parse(to), now);
  for (let start = first; start < end; start += HOUR) {
    const seconds = Math.max(1, Math.round((Math.min(start + HOUR, now) - start) / 1000));
    const gpuSeconds = byWindow.get(start) ?? 0;
    const reserved = gpuSeconds / seconds;
    points.push({
      windowStart: new Date(start).toISOString(),
      windowEnd: new Date(start + HOUR).toISOString(),
      seconds,
      gpuSeconds,
      reservedGpus: twoDecimals(reserved),
      freeGpus: twoDecimals(Math.max(0, pool.total - pool.unavailable - reserved)),
    });
  }
  return points;
}

/**
 * A pool's capacity over the last `hours` hours (to the next full hour): `capacity.get` for the
 * pool now, then its usage rows.
 *
 * @example
 * const history = await loadCapacityHistory(client, 'root', 'pool_…', 24);
 * history.points.map((p) => [p.windowStart, p.reservedGpus, p.freeGpus]);
 */
export async function loadCapacityHistory(
  client: ComputeClient,
  tenantId: string,
  poolId: string,
  hours: number,
  now = Date.now(),
): Promise<CapacityHistory> {
  const to = Math.ceil(now / HOUR) * HOUR;
  const from = to - hours * HOUR;
  const period = { from: new Date(from).toISOString(), to: new Date(to).toISOString() };
  const [capacity, series] = await Promise.all([
    client.call('capacity.get', { tenantId, poolId }),
    loadUsageSeries(client, tenantId, { ...period, poolId }),
  ]);
  const found = capacity.items.find((item) => item.poolId === poolId);
  const pool: CapacityNow = found
    ? {
        poolId,
        name: found.name,
        total: found.total,
        reserved: found.reserved,
        unavailable: found.unavailable,
      }
    : { poolId, name: poolId, total: 0, reserved: 0, unavailable: 0 };
  return {
    pool,
    ...period,
    points: capacityPoints(series, pool, period.from, period.to, now),
    cutShort: series.cutShort,
  };
}
