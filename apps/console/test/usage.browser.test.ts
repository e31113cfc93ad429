/**
 * The Usage and quotas page in a real Chromium against the real server.mjs on PostgreSQL with two
 * simulated machines: GPUs reserved and released through the API while the page is open (by the
 * root tenant and by acme, to which the pool is offered) redraw the chart live, and the chart's
 * GPU-seconds per pool and, with the toggle, per tenant (its legend and the sum of its bars) equal
 * the sums of usage.list for the period the page shows; Export CSV downloads exactly the content
 * usage.export answers for that period (what `usage export --export-format csv` writes); a period
 * that ends before it starts is refused by the server on the From field. Quotas: the administrator
 * sets and clears the pool's GPU quota (the API agrees), a negative limit is refused by the server
 * on the Limit field, an unknown tenant on the Tenant field. A viewer at 375 px sees the chart, Save
 * disabled (the API refuses quotas.set too) and Export enabled exactly when the API lets them export.
 * Acme's tenant administrator sees acme's own usage only (by tenant: acme alone, equal to usage.list
 * as acme), no platform pages, and Export CSV enabled, downloading what usage.export answers acme;
 * acme's quotas on the offered pool as quotas.get answers them, with Save disabled (only the pool's
 * owner sets quotas, and the API refuses acme).
 */
import { readFileSync } from 'node:fs';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adminSessionToken,
  api,
  type ConsoleProcess,
  launchBrowser,
  signIn,
  startConsole,
  tenantAdministrator,
  computeCodeOf,
  screenshot,
  overflowsSideways,
  consoleContext,
  personWithRole,
} from './browser-support.js';

interface UsageRow {
  windowStart: string;
  tenantId: string;
  poolId: string;
  gpuSeconds: number;
}
interface Quota {
  resource: string;
  limit: number | null;
  used: number;
  version: number;
}

const viewer = { email: 'usage-viewer@console.local', password: 'viewer-password-2026' };
const acmeAdmin = { email: 'admin@acme.test', password: 'acme-admin-password-2026' };

let server: ConsoleProcess;
let browser: Browser;
let adminContext: BrowserContext;
let viewerContext: BrowserContext;
let page: Page;
let adminToken: string;
let viewerToken: string;
let acmeToken: string;
let poolId: string;

const compute = <T>(path: string, input: Record<string, unknown>, token = adminToken) =>
  api<T>(server.origin, `/api/compute/${path}`, token, input);

const codeOf = (path: string, input: Record<string, unknown>, token: string) =>
  computeCodeOf(server.origin, path, input, token);

/** GPU-seconds per pool (or per tenant) over the period, summed from every page of usage.list. */
async function usageBy(
  grouping: 'pool' | 'tenant',
  from: string,
  to: string,
  token = adminToken,
): Promise<Record<string, number>> {
  const sums: Record<string, number> = {};
  let cursor: string | undefined;
  do {
    const page = await compute<{ items: UsageRow[]; nextCursor: string | null }>(
      'usage/list',
      { from, to, limit: 500, ...(cursor ? { cursor } : {}) },
      token,
    );
    for (const row of page.items) {
      const key = grouping === 'pool' ? row.poolId : row.tenantId;
      sums[key] = (sums[key] ?? 0) + row.gpuSeconds;
    }
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return sums;
}
const usageByPool = (from: string, to: string) => usageBy('pool', from, to);

/** What the chart says per pool (or tenant): its legend's totals, and its bars' sums. */
async function chartBy(
  target: Page,
  grouping: 'pool' | 'tenant',
): Promise<{ legend: Record<string, number>; bars: Record<string, number> }> {
  return target.evaluate((grouping) => {
    const legend: Record<string, number> = {};
    const bars: Record<string, number> = {};
    for (const item of document.querySelectorAll<HTMLElement>(`[data-${grouping}-total]`))
      legend[item.getAttribute(`data-${grouping}-total`)!] = Number(item.dataset.gpuSeconds);
    for (const rect of document.querySelectorAll<SVGRectElement>(`rect[data-${grouping}]`)) {
      const key = rect.getAttribute(`data-${grouping}`)!;
      bars[key] = (bars[key] ?? 0) + Number(rect.getAttribute('data-gpu-seconds'));
    }
    return { legend, bars };
  }, grouping);
}
const chartByPool = (target: Page) => chartBy(target, 'pool');

const shot = screenshot;
const overflows = overflowsSideways;

beforeAll(async () => {
  [server, browser] = await Promise.all([startConsole(2), launchBrowser()]);
  adminToken = await adminSessionToken(server);
  const pools = await compute<{ items: { id: string; name: string }[] }>('pools/list', {});
  poolId = pools.items.find((pool) => pool.name === 'sim-gpu')!.id;
  const person = await personWithRole(
    server,
    adminToken,
    { ...viewer, displayName: 'Usage viewer' },
    'viewer',
  );
  viewerToken = person.token;
  // Acme uses the root tenant's pool too: the pool is offered to it, and its administrator accepts.
  acmeToken = await tenantAdministrator(server, adminToken, { id: 'acme', name: 'Acme' }, acmeAdmin);
  await compute('pools/offer', { poolId, offerTenantId: 'acme' });
  await compute('offers/accept', { poolId }, acmeToken);
  adminContext = await consoleContext(browser, 'wide', { acceptDownloads: true });
  viewerContext = await consoleContext(browser, 'narrow');
  page = await signIn(adminContext, server.origin, server.adminEmail, server.adminPassword);
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe('the Usage and quotas page', () => {
  let from: string;
  let to: string;

  it("GPUs held while the page is open redraw the chart live, and its values equal the API's", async () => {
    await page.getByRole('link', { name: 'Usage and quotas' }).click();
    await page.waitForURL(`${server.origin}/usage`);
    await page.locator('[data-live="open"]').waitFor();
    await page.locator('[data-usage-chart]').waitFor();
    await page.getByText('No GPU was held in this period.').waitFor();
    from = await page.getByLabel('From (inclusive)').inputValue();
    to = await page.getByLabel('To (exclusive)').inputValue();
    const held = await compute<{ id: string }>('reservations/create', {
      poolId,
      gpus: 2,
      durationSeconds: 3600,
    });
    const acmeHeld = await compute<{ id: string }>(
      'reservations/create',
      { poolId, gpus: 1, durationSeconds: 3600 },
      acmeToken,
    );
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    // Acme's release first: the root tenant's own release is the event that redraws its page.
    await compute('reservations/release', { reservationId: acmeHeld.id }, acmeToken);
    await compute('reservations/release', { reservationId: held.id });
    // The release is an event: the chart is read again with the bindings' final seconds.
    const expected = await usageByPool(from, to);
    expect(expected[poolId]).toBeGreaterThanOrEqual(4);
    await expect.poll(async () => (await chartByPool(page)).legend, { timeout: 15_000 }).toEqual(expected);
    await expect((await chartByPool(page)).bars).toEqual(expected);
    const legend = page.locator(`[data-pool-total="${poolId}"]`);
    await expect(legend.textContent()).resolves.toContain('sim-gpu:');
    await expect(overflows(page)).resolves.toBe(false);
    await shot(page, 'usage-1440');

    // The same period by tenant: the root tenant's own use and acme's on the root tenant's pool.
    const byTenant = await usageBy('tenant', from, to);
    expect(Object.keys(byTenant).sort()).toEqual(['acme', 'root']);
    expect(byTenant.acme).toBeGreaterThanOrEqual(2);
    await page.getByRole('radio', { name: 'Tenant' }).check();
    await page.locator('[data-usage-chart="tenant"]').waitFor();
    await expect(chartBy(page, 'tenant')).resolves.toEqual({ legend: byTenant, bars: byTenant });
    await page.getByRole('heading', { name: 'GPU-hours by tenant' }).waitFor();
    await shot(page, 'usage-by-tenant-1440');
    await page.getByRole('radio', { name: 'Pool' }).check();
    await page.locator('[data-usage-chart="pool"]').waitFor();
  }, 120_000);

  it('Export CSV downloads exactly what usage.export answers for the period', async () => {
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Export CSV' }).click(),
    ]);
    const file = await download.path();
    const exported = await compute<{ content: string; rows: number }>('usage/export', {
      format: 'csv',
      from,
      to,
    });
    expect(readFileSync(file, 'utf8')).toBe(exported.content);
    expect(exported.rows).toBeGreaterThan(0);
    expect(download.suggestedFilename()).toMatch(/^usage-.*\.csv$/);
    await page
      .getByRole('status')
      .filter({ hasText: `Exported ${exported.rows} row(s)` })
      .waitFor();
  }, 120_000);

  it('a period that ends before it starts is refused by the server on the From field', async () => {
    const form = page.getByRole('form', { name: 'Usage period' });
    await form.getByLabel('From (inclusive)').fill(to);
    await form.getByLabel('To (exclusive)').fill(from);
    await form.getByRole('button', { name: 'Show' }).click();
    const error = form.locator('[data-field-error="from"]');
    await error.waitFor();
    await expect(error.textContent()).resolves.toBe('from must be before to');
    await expect(form.getByLabel('From (inclusive)').getAttribute('aria-invalid')).resolves.toBe('true');
    await shot(page, 'usage-field-error');
  }, 120_000);

  it('sets and clears a quota; the server refuses a negative limit and an unknown tenant on their fields', async () => {
    const show = page.getByRole('form', { name: 'Show quotas' });
    await show.getByLabel('Pool').selectOption(poolId);
    await show.getByRole('button', { name: 'Show quotas' }).click();
    const gpus = page.locator('tr[data-quota="gpus"]');
    await gpus.waitFor();
    await expect(gpus.locator('[data-limit]').textContent()).resolves.toBe('no limit');
    const set = page.getByRole('form', { name: 'Set the gpus quota' });
    await set.getByLabel('Limit (empty for none)').fill('-1');
    await set.getByRole('button', { name: 'Save' }).click();
    const limitError = set.locator('[data-field-error="limit"]');
    await limitError.waitFor();
    await expect(limitError.textContent()).resolves.toMatch(/>=0|at least 0|greater than or equal to 0/i);

    await set.getByLabel('Limit (empty for none)').fill('4');
    await set.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => gpus.locator('[data-limit]').textContent()).toBe('4');
    const read = await compute<{ items: Quota[] }>('quotas/get', { poolId });
    expect(read.items.find((quota) => quota.resource === 'gpus')).toMatchObject({ limit: 4, version: 1 });

    const cleared = page.getByRole('form', { name: 'Set the gpus quota' });
    await cleared.getByLabel('Limit (empty for none)').fill('');
    await cleared.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => gpus.locator('[data-limit]').textContent()).toBe('no limit');
    const again = await compute<{ items: Quota[] }>('quotas/get', { poolId });
    expect(again.items.find((quota) => quota.resource === 'gpus')).toMatchObject({ limit: null, version: 2 });

    await show.getByLabel('Tenant').fill('no-such-tenant');
    await show.getByRole('button', { name: 'Show quotas' }).click();
    const tenantError = show.locator('[data-field-error="subjectTenantId"]');
    await tenantError.waitFor();
    await expect(tenantError.textContent()).resolves.toBe('tenant no-such-tenant does not exist');
  }, 120_000);

  it('a viewer at 375 px sees the chart, Save disabled and Export as the API decides it', async () => {
    const viewerPage = await signIn(viewerContext, server.origin, viewer.email, viewer.password);
    await viewerPage.goto(`${server.origin}/usage`);
    await viewerPage.locator(`[data-pool-total="${poolId}"]`).waitFor();
    const exportCode = await codeOf('usage/export', { format: 'csv' }, viewerToken);
    const exportButton = viewerPage.getByRole('button', { name: 'Export CSV' });
    if (exportCode === 'OK') await expect.poll(() => exportButton.isEnabled()).toBe(true);
    else {
      expect(exportCode).toBe('ACCESS_DENIED');
      await expect.poll(() => exportButton.getAttribute('title')).toBe('Your roles do not allow this');
      await expect(exportButton.isDisabled()).resolves.toBe(true);
    }
    const show = viewerPage.getByRole('form', { name: 'Show quotas' });
    await show.getByLabel('Pool').selectOption(poolId);
    await show.getByRole('button', { name: 'Show quotas' }).click();
    const save = viewerPage
      .getByRole('form', { name: 'Set the gpus quota' })
      .getByRole('button', { name: 'Save' });
    await expect.poll(() => save.getAttribute('title')).toBe('Your roles do not allow this');
    await expect(save.isDisabled()).resolves.toBe(true);
    await expect(
      codeOf('quotas/set', { poolId, subjectTenantId: 'root', resource: 'gpus', limit: 1 }, viewerToken),
    ).resolves.toBe('ACCESS_DENIED');
    await expect(overflows(viewerPage)).resolves.toBe(false);
    await shot(viewerPage, 'usage-viewer-375');
    await viewerPage.close();
  }, 120_000);

  it("acme's tenant administrator sees acme's own usage, no platform pages, and exports it", async () => {
    const context = await browser.newContext({
      viewport: { width: 375, height: 800 },
      acceptDownloads: true,
    });
    context.setDefaultTimeout(20_000);
    const acmePage = await signIn(context, server.origin, acmeAdmin.email, acmeAdmin.password, 'acme');
    await expect(acmePage.getByRole('heading', { name: 'Platform' }).count()).resolves.toBe(0);
    await acmePage.getByRole('link', { name: 'Usage and quotas' }).click();
    await acmePage.waitForURL(`${server.origin}/usage`);
    const form = acmePage.getByRole('form', { name: 'Usage period' });
    await form.getByLabel('From (inclusive)').fill(from);
    await form.getByLabel('To (exclusive)').fill(to);
    await form.getByRole('button', { name: 'Show' }).click();
    const acmeUsage = await usageBy('tenant', from, to, acmeToken);
    expect(Object.keys(acmeUsage)).toEqual(['acme']);
    await acmePage.getByRole('radio', { name: 'Tenant' }).check();
    await expect.poll(async () => (await chartBy(acmePage, 'tenant')).legend).toEqual(acmeUsage);
    await expect(chartBy(acmePage, 'pool')).resolves.toEqual({ legend: {}, bars: {} });
    await acmePage.getByRole('radio', { name: 'Pool' }).check();
    await expect
      .poll(async () => (await chartBy(acmePage, 'pool')).legend)
      .toEqual(await usageBy('pool', from, to, acmeToken));

    const exportButton = acmePage.getByRole('button', { name: 'Export CSV' });
    await expect.poll(() => exportButton.isEnabled()).toBe(true);
    const [download] = await Promise.all([acmePage.waitForEvent('download'), exportButton.click()]);
    const exported = await compute<{ content: string; rows: number }>(
      'usage/export',
      { format: 'csv', from, to },
      acmeToken,
    );
    expect(readFileSync(await download.path(), 'utf8')).toBe(exported.content);

    // Quotas: acme reads its own on the pool it was offered; only the pool's owner sets them.
    const show = acmePage.getByRole('form', { name: 'Show quotas' });
    await show.getByLabel('Pool').selectOption(poolId);
    await expect(show.getByLabel('Tenant').inputValue()).resolves.toBe('acme');
    await show.getByRole('button', { name: 'Show quotas' }).click();
    const gpus = acmePage.locator('tr[data-quota="gpus"]');
    await gpus.waitFor();
    const acmeQuotas = await compute<{ items: Quota[] }>('quotas/get', { poolId }, acmeToken);
    const acmeGpus = acmeQuotas.items.find((quota) => quota.resource === 'gpus')!;
    await expect(gpus.locator('[data-used]').textContent()).resolves.toBe(String(acmeGpus.used));
    const save = acmePage
      .getByRole('form', { name: 'Set the gpus quota' })
      .getByRole('button', { name: 'Save' });
    await expect
      .poll(() => save.getAttribute('title'))
      .toBe('Only the pool’s owner sets its quotas; this pool was offered to your tenant');
    await expect(save.isDisabled()).resolves.toBe(true);
    await expect(
      codeOf('quotas/set', { poolId, subjectTenantId: 'acme', resource: 'gpus', limit: 1 }, acmeToken),
    ).resolves.not.toBe('OK');
    await expect(overflows(acmePage)).resolves.toBe(false);
    await shot(acmePage, 'usage-tenant-admin-375');
    await context.close();
  }, 120_000);
});
