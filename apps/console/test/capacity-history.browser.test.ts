/**
 * Capacity over time on the Capacity page, in a real Chromium against the real server.mjs on
 * PostgreSQL with two simulated machines: GPUs reserved and released through the API show in the
 * chart, and every hour's column carries exactly the GPU-seconds usage.list answers for the pool in
 * that hour, its reserved GPUs that over the hour's elapsed seconds, and its free GPUs capacity.get's
 * total less its unavailable GPUs and the reserved ones; the period's choice redraws it with one
 * column per hour. The page passes axe-core with no serious or critical violation and does not
 * scroll sideways at 1,440 px or 375 px.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adminSessionToken,
  api,
  axeViolations,
  consoleContext,
  type ConsoleProcess,
  launchBrowser,
  overflowsSideways,
  screenshot,
  signIn,
  startConsole,
} from './browser-support.js';

interface CapacityPool {
  poolId: string;
  name: string;
  total: number;
  unavailable: number;
}
interface UsageRow {
  windowStart: string;
  poolId: string;
  gpuSeconds: number;
}
interface Column {
  windowStart: string;
  gpuSeconds: number;
  seconds: number;
  reservedGpus: number;
  freeGpus: number;
}

let server: ConsoleProcess;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let adminToken: string;
let pool: CapacityPool;

const compute = <T>(path: string, input: Record<string, unknown>, token = adminToken) =>
  api<T>(server.origin, `/api/compute/${path}`, token, input);

const twoDecimals = (value: number) => Math.round(value * 100) / 100;

/** usage.list's GPU-seconds for the pool per hour window over the period, every page read. */
async function usageByWindow(from: string, to: string): Promise<Record<string, number>> {
  const sums: Record<string, number> = {};
  let cursor: string | null = null;
  do {
    const answer: { items: UsageRow[]; nextCursor: string | null } = await compute('usage/list', {
      from,
      to,
      poolId: pool.poolId,
      limit: 500,
      ...(cursor ? { cursor } : {}),
    });
    for (const row of answer.items)
      sums[new Date(row.windowStart).toISOString()] =
        (sums[new Date(row.windowStart).toISOString()] ?? 0) + row.gpuSeconds;
    cursor = answer.nextCursor;
  } while (cursor);
  return sums;
}

/** The chart's columns as the page drew them. */
async function columns(target: Page): Promise<Column[]> {
  return target.locator('[data-capacity-chart] g[data-window]').evaluateAll((groups) =>
    groups.map((g) => ({
      windowStart: g.getAttribute('data-window')!,
      gpuSeconds: Number(g.getAttribute('data-gpu-seconds')),
      seconds: Number(g.getAttribute('data-seconds')),
      reservedGpus: Number(g.getAttribute('data-reserved-gpus')),
      freeGpus: Number(g.getAttribute('data-free-gpus')),
    })),
  );
}

beforeAll(async () => {
  [server, browser] = await Promise.all([startConsole(2), launchBrowser()]);
  adminToken = await adminSessionToken(server);
  const capacity = await compute<{ items: CapacityPool[] }>('capacity/get', {});
  pool = capacity.items.find((item) => item.total > 0)!;
  context = await consoleContext(browser, 'wide');
  page = await signIn(context, server.origin, server.adminEmail, server.adminPassword);
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe('capacity over time', () => {
  it("draws each hour's reserved and free GPUs as usage.list and capacity.get answer them", async () => {
    await page.goto(`${server.origin}/capacity`);
    await page.getByRole('heading', { name: 'Capacity over time' }).waitFor();
    const form = page.getByRole('form', { name: 'Capacity period' });
    await form.getByLabel('Pool').selectOption({ label: pool.name });
    const held = await compute<{ id: string }>('reservations/create', {
      poolId: pool.poolId,
      gpus: 2,
      durationSeconds: 3600,
    });
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    await compute('reservations/release', { reservationId: held.id });
    const figure = page.locator(`[data-capacity-chart="${pool.poolId}"]`);
    await figure.waitFor();
    const from = (await figure.getAttribute('data-from'))!;
    const to = (await figure.getAttribute('data-to'))!;
    const expected = await usageByWindow(from, to);
    const reservedSeconds = Object.values(expected).reduce((a, b) => a + b, 0);
    expect(reservedSeconds).toBeGreaterThanOrEqual(4);
    // The release is a capacity change: the chart is read again with the final seconds.
    await expect
      .poll(
        async () => {
          const drawn = await columns(page);
          return Object.fromEntries(
            drawn.filter((c) => c.gpuSeconds > 0).map((c) => [c.windowStart, c.gpuSeconds]),
          );
        },
        { timeout: 15_000 },
      )
      .toEqual(expected);
    const now = await compute<{ items: CapacityPool[] }>('capacity/get', { poolId: pool.poolId });
    const today = now.items[0]!;
    await expect(figure.getAttribute('data-total')).resolves.toBe(String(today.total));
    const drawn = await columns(page);
    // One column per hour of the period that has begun: 24, the last of them the current hour.
    expect(drawn).toHaveLength(24);
    expect(drawn[0]!.windowStart).toBe(from);
    for (const column of drawn) {
      expect(column.seconds).toBeGreaterThan(0);
      expect(column.seconds).toBeLessThanOrEqual(3600);
      expect(column.gpuSeconds).toBe(expected[column.windowStart] ?? 0);
      const reserved = column.gpuSeconds / column.seconds;
      expect(column.reservedGpus).toBe(twoDecimals(reserved));
      expect(column.freeGpus).toBe(twoDecimals(Math.max(0, today.total - today.unavailable - reserved)));
    }
    await expect(overflowsSideways(page)).resolves.toBe(false);
    await expect(axeViolations(page)).resolves.toEqual([]);
    await screenshot(page, 'capacity-over-time-1440');
  }, 90_000);

  it('the period redraws it with one column per hour; at 375 px it does not scroll sideways', async () => {
    const form = page.getByRole('form', { name: 'Capacity period' });
    await form.getByLabel('Period').selectOption({ label: 'Last 7 days' });
    await expect.poll(async () => (await columns(page)).length, { timeout: 15_000 }).toBe(24 * 7);
    const figure = page.locator(`[data-capacity-chart="${pool.poolId}"]`);
    const from = (await figure.getAttribute('data-from'))!;
    const to = (await figure.getAttribute('data-to'))!;
    expect(Date.parse(to) - Date.parse(from)).toBe(7 * 24 * 3_600_000);
    const expected = await usageByWindow(from, to);
    const drawn = await columns(page);
    expect(
      Object.fromEntries(drawn.filter((c) => c.gpuSeconds > 0).map((c) => [c.windowStart, c.gpuSeconds])),
    ).toEqual(expected);
    const narrow = await consoleContext(browser, 'narrow');
    const small = await signIn(narrow, server.origin, server.adminEmail, server.adminPassword);
    await small.goto(`${server.origin}/capacity`);
    await small.locator('[data-capacity-chart]').waitFor();
    await expect(overflowsSideways(small)).resolves.toBe(false);
    await expect(axeViolations(small)).resolves.toEqual([]);
    await screenshot(small, 'capacity-over-time-375');
    await narrow.close();
  }, 90_000);
});
