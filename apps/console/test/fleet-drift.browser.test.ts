/**
 * The Fleet drift page in a real Chromium against the real server.mjs on PostgreSQL: the root
 * administrator opens it from the navigation before any apply (nothing to compare with, and the
 * commands to start), applies the exported fleet through the API (the page turns "in sync" from the
 * fleet.applied event), then a quota is set behind the document's back and the fleet.drift job runs:
 * the page shows "drifted" live, with the quota's field, its value in the applied document and its
 * live value exactly as fleet.status answers them, the check's time and the fleet's events, and
 * no page scrolls sideways at 375 px. A member of the root tenant and a member of another tenant
 * have no link to it and see "platform operators only" with nothing to press, and the API refuses
 * them fleet.status.
 */
import { sql } from 'kysely';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '@better-compute/db/testing';
import {
  adminSessionToken,
  api,
  type ConsoleProcess,
  launchBrowser,
  signIn,
  startConsole,
  computeCodeOf,
  screenshot,
  overflowsSideways,
  consoleContext,
  personWithRole,
  expectIdRef,
} from './browser-support.js';

interface FleetStatus {
  applied: { id: string; planHash: string } | null;
  drift: {
    state: string;
    checkedAt: string | null;
    changes: {
      op: string;
      kind: string;
      id: string | null;
      fields: { field: string; from: unknown; to: unknown }[];
    }[];
  };
}

const rootMember = { email: 'fleet-member@console.local', password: 'member-password-2026' };
const acmeMember = { email: 'member@acme.test', password: 'member-password-2026' };

let server: ConsoleProcess & { database: TestDatabase };
let browser: Browser;
let adminContext: BrowserContext;
let page: Page;
let adminToken: string;
let poolId: string;

const compute = <T>(path: string, input: Record<string, unknown>, token = adminToken) =>
  api<T>(server.origin, `/api/compute/${path}`, token, input);

const codeOf = (path: string, input: Record<string, unknown>, token: string) =>
  computeCodeOf(server.origin, path, input, token);

/** A member of `tenantId`; their session token. */
const person = async (who: { email: string; password: string }, tenantId: string) =>
  (
    await personWithRole(
      server,
      adminToken,
      { ...who, displayName: `Member of ${tenantId}` },
      'member',
      tenantId,
    )
  ).token;

const shot = screenshot;
const overflows = overflowsSideways;

beforeAll(async () => {
  [server, browser] = await Promise.all([startConsole(1), launchBrowser()]);
  adminToken = await adminSessionToken(server);
  const pools = await compute<{ items: { id: string; name: string }[] }>('pools/list', {});
  poolId = pools.items.find((pool) => pool.name === 'sim-gpu')!.id;
  adminContext = await consoleContext(browser, 'wide');
  page = await signIn(adminContext, server.origin, server.adminEmail, server.adminPassword);
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe('the Fleet drift page', () => {
  it('before any apply, says there is nothing to compare with and shows the commands to start', async () => {
    await page.getByRole('link', { name: 'Fleet drift' }).click();
    await page.waitForURL(`${server.origin}/fleet`);
    await page.locator('[data-live="open"]').waitFor();
    await page.locator('[data-drift-state="unknown"]').waitFor();
    await expect(page.locator('[data-applied]').textContent()).resolves.toBe('None yet.');
    await expect(page.locator('pre[data-command]').first().textContent()).resolves.toContain(
      'better-compute fleet apply fleet.json --plan-hash H',
    );
    // The page applies nothing: no button acts on the fleet.
    await expect(page.locator('main button').count()).resolves.toBe(0);
  }, 120_000);

  it('turns in sync on an apply, then shows a change made behind the document’s back once the job looks', async () => {
    const document = await compute<Record<string, unknown>>('fleet/export', {});
    const plan = await compute<{ planHash: string; empty: boolean }>('fleet/plan', { document });
    expect(plan.empty).toBe(true);
    const applied = await compute<{ applyId: string }>('fleet/apply', { document, planHash: plan.planHash });
    // fleet.applied is an event: the page reads the status again without a reload.
    await page.locator('[data-drift-state="converged"]').waitFor();
    await expect(page.locator('[data-applied]').getAttribute('data-applied')).resolves.toBe(applied.applyId);
    await page.locator('[data-event-type="fleet.applied"]').waitFor();

    // Behind the document's back: a quota the applied document does not have.
    await compute('quotas/set', { poolId, subjectTenantId: 'root', resource: 'gpus', limit: 3 });
    // The job looks every minute; the test moves its queued run to now rather than wait for it.
    await sql`update compute.jobs set run_at = now() where kind = 'fleet.drift' and state = 'queued'`.execute(
      server.database.db,
    );
    await page.locator('[data-drift-state="drifted"]').waitFor({ timeout: 30_000 });
    const status = await compute<FleetStatus>('fleet/status', {});
    expect(status.drift.state).toBe('drifted');
    const change = status.drift.changes.find((c) => c.id === poolId)!;
    const field = change.fields.find((f) => f.field === 'quotas.root.gpus')!;
    expect(field).toEqual({ field: 'quotas.root.gpus', from: null, to: 3 });
    const row = page.locator(`tr[data-drift="${poolId}"][data-field="quotas.root.gpus"]`);
    await row.waitFor();
    await expect(row.locator('[data-document-value]').textContent()).resolves.toBe('none');
    await expect(row.locator('[data-live-value]').textContent()).resolves.toBe('3');
    // The drifted pool by its name and short id, the full id a press away.
    await expect(row.textContent()).resolves.toContain('pool sim-gpu');
    await expectIdRef(row, poolId);
    await expectIdRef(page.locator('[data-applied]'), applied.applyId);
    await expect(page.locator('[data-checked-at]').getAttribute('data-checked-at')).resolves.toBe(
      status.drift.checkedAt,
    );
    await page.locator('[data-event-type="fleet.drifted"]').waitFor();
    await expect(
      page.locator('[data-fleet-events] li').first().getAttribute('data-event-type'),
    ).resolves.toBe('fleet.drifted');
    await expect(overflows(page)).resolves.toBe(false);
    await shot(page, 'fleet-drift-1440');
  }, 120_000);

  it('works at 375 px', async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    await page.reload();
    await page.locator(`tr[data-drift="${poolId}"]`).first().waitFor();
    await expect(overflows(page)).resolves.toBe(false);
    await shot(page, 'fleet-drift-375');
    await page.setViewportSize({ width: 1440, height: 900 });
  }, 120_000);

  it('a member of the root tenant has no link to it and sees "platform operators only"; the API refuses them', async () => {
    const token = await person(rootMember, 'root');
    await expect(codeOf('fleet/status', {}, token)).resolves.toBe('ACCESS_DENIED');
    const context = await consoleContext(browser, 'narrow');
    const memberPage = await signIn(context, server.origin, rootMember.email, rootMember.password);
    await memberPage.getByRole('heading', { name: 'Platform' }).waitFor();
    await expect(memberPage.getByRole('link', { name: 'Fleet drift' }).count()).resolves.toBe(0);
    await memberPage.goto(`${server.origin}/fleet`);
    await memberPage.getByRole('heading', { name: 'Platform operators only' }).waitFor();
    await expect(memberPage.locator('main button').count()).resolves.toBe(0);
    await expect(memberPage.locator('[data-drift-state]').count()).resolves.toBe(0);
    await expect(overflows(memberPage)).resolves.toBe(false);
    await shot(memberPage, 'fleet-drift-member-375');
    await context.close();
  }, 120_000);

  it('a member of another tenant sees the same state, and nothing is asked of the API', async () => {
    await api(server.origin, '/api/iam/tenants/create', adminToken, { id: 'acme', name: 'Acme' });
    const token = await person(acmeMember, 'acme');
    await expect(codeOf('fleet/status', {}, token)).resolves.not.toBe('OK');
    const context = await browser.newContext();
    context.setDefaultTimeout(20_000);
    const memberPage = await signIn(context, server.origin, acmeMember.email, acmeMember.password, 'acme');
    const fleetCalls: string[] = [];
    memberPage.on('request', (request) => {
      if (request.url().includes('/api/compute/fleet/')) fleetCalls.push(request.url());
    });
    await expect(memberPage.getByRole('link', { name: 'Fleet drift' }).count()).resolves.toBe(0);
    const response = await memberPage.goto(`${server.origin}/fleet`);
    expect(response?.status()).toBe(200);
    await memberPage.getByRole('heading', { name: 'Platform operators only' }).waitFor();
    expect(fleetCalls).toEqual([]);
    await context.close();
  }, 120_000);
});
