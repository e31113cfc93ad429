/**
 * The PXE discovery page in a real Chromium against the real server.mjs on PostgreSQL. A site with
 * a site agent (joined with a site token) and machines enrolled through the API: two waiting for
 * their PXE MAC (product UUID only), one with its MAC. What the agent saw PXE-booting is put in place
 * the way an agent's report lands: the metal module's recordPxeDiscovery, the function the gateway
 * calls, on the console's database. The page lists the tenant's sites (not another tenant's), shows
 * the rows candidates, unknown, enrolled; only the candidate has Confirm, which asks in the
 * browser's confirmation first (dismissed, nothing is bound; accepted, the MAC is bound and the row
 * becomes enrolled, as the API agrees); Refresh shows a new report; the by-hand form stays disabled
 * until both fields are well formed and shows the server's CONFLICT in place; and the page fits
 * 375 px.
 */
import { join } from 'node:path';
import type { Kysely } from 'kysely';
import type { Browser, BrowserContext, Dialog, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordPxeDiscovery } from '../../../packages/better-compute/src/modules/metal/index.js';
import type { ComputeTables } from '../../../packages/better-compute/src/db/tables.js';
import type { TestDatabase } from '@better-compute/db/testing';
import {
  adminSessionToken,
  api,
  type ConsoleProcess,
  launchBrowser,
  screenshotsDir,
  signIn,
  startConsole,
  consoleContext,
} from './browser-support.js';

interface Machine {
  id: string;
  name: string;
  macs: string[];
}

const WAITING_UUID = '4c4c4544-0042-3510-8052-b4c04f4a4e31';
const CANDIDATE_MAC = '52:54:00:12:34:56';
const KNOWN_MAC = '52:54:00:aa:bb:08';
const globexAdmin = { email: 'admin@globex.test', password: 'globex-password-2026' };

let server: ConsoleProcess & { database: TestDatabase };
let browser: Browser;
let context: BrowserContext;
let page: Page;
let adminToken: string;
let siteId: string;
let globexSiteId: string;
let agentNodeId: string;
/** Enrolled with its UUID only; its MAC is seen PXE-booting. */
let waiting: Machine;
/** Enrolled with its UUID only and never seen: bound by hand. */
let labelled: Machine;
let known: Machine;

const compute = <T>(path: string, input: Record<string, unknown>, token = adminToken) =>
  api<T>(server.origin, `/api/compute/${path}`, token, input);
const machine = (machineId: string) => compute<Machine>('metal/get', { machineId });
const shot = (target: Page, name: string) =>
  target.screenshot({ path: join(screenshotsDir, `${name}.png`), fullPage: true });
const overflows = (target: Page) =>
  target.evaluate(() => document.documentElement.scrollWidth > document.documentElement.clientWidth);

/** A report of the site's agent, as the gateway records it. */
async function seen(report: { mac: string; uuid?: string }, minutesAgo: number) {
  const db = server.database.db as unknown as Kysely<ComputeTables>;
  const outcome = await recordPxeDiscovery(
    db,
    agentNodeId,
    report,
    new Date(Date.now() - minutesAgo * 60_000),
  );
  expect(outcome).toEqual({ outcome: 'recorded', siteId });
}

/** Answers the next browser confirmation; resolves with what it asked. */
function answerConfirmation(target: Page, accept: boolean): Promise<string> {
  return new Promise((resolve) => {
    target.once('dialog', (dialog: Dialog) => {
      resolve(dialog.message());
      void (accept ? dialog.accept() : dialog.dismiss());
    });
  });
}

async function openDiscovery(target: Page): Promise<void> {
  await target.getByRole('navigation').getByRole('link', { name: 'PXE discovery' }).click();
  await target.waitForURL(`${server.origin}/discovery`);
  await target.getByRole('heading', { level: 1, name: 'PXE discovery' }).waitFor();
  // The picker is filled once the sites are read; choose the test's site.
  await target.locator(`select[name="site"] option[value="${siteId}"]`).waitFor({ state: 'attached' });
  await target.locator('select[name="site"]').selectOption(siteId);
  await target.locator('tr[data-mac]').first().waitFor();
}

const kinds = (target: Page) =>
  target
    .locator('tr[data-mac]')
    .evaluateAll((rows) =>
      rows.map((row) => `${row.getAttribute('data-kind')} ${row.getAttribute('data-mac')}`),
    );

beforeAll(async () => {
  [server, browser] = await Promise.all([startConsole(1), launchBrowser()]);
  adminToken = await adminSessionToken(server);
  siteId = (await compute<{ id: string }>('sites/create', { name: 'dc-pxe' })).id;
  const pool = await compute<{ id: string }>('pools/create', { siteId, name: 'pxe-agents', class: 'gpu' });
  const { token: joinToken } = await compute<{ token: string }>('siteTokens/create', {
    poolId: pool.id,
    preApproved: true,
  });
  agentNodeId = (
    await compute<{ nodeId: string }>('nodes/join', {
      joinToken,
      hostname: 'pxe-agent-1',
      inventory: { cpuCores: 2, memoryGiB: 4, gpus: [] },
    })
  ).nodeId;
  const enroll = (name: string, productUuid: string, macs?: string[]) =>
    compute<Machine>('metal/enroll', {
      siteId,
      name,
      bmcDriver: 'ipmi',
      bmcAddress: '10.0.0.7',
      bmcUser: 'admin',
      bmcPassword: 'bmc-pass',
      productUuid,
      ...(macs ? { macs } : {}),
    });
  waiting = await enroll('r12-u07', WAITING_UUID);
  labelled = await enroll('r12-u09', '4c4c4544-0042-3510-8052-b4c04f4a4e33');
  known = await enroll('r12-u08', '4c4c4544-0042-3510-8052-b4c04f4a4e32', [KNOWN_MAC]);
  // The enrolled machine's MAC is the newest, yet the candidate is listed first.
  await seen({ mac: KNOWN_MAC }, 1);
  await seen({ mac: '52:54:00:00:00:99', uuid: '11111111-2222-3333-4444-555555555555' }, 30);
  await seen({ mac: '52-54-00-12-34-56', uuid: WAITING_UUID.toUpperCase() }, 20);
  await seen({ mac: '52:54:00:00:00:98' }, 10);

  // Another tenant with a site of its own, made by its own administrator.
  await api(server.origin, '/api/iam/tenants/create', adminToken, { id: 'globex', name: 'Globex' });
  const person = await api<{ id: string }>(server.origin, '/api/iam/principals/create', adminToken, {
    tenantId: 'globex',
    kind: 'person',
    email: globexAdmin.email,
    password: globexAdmin.password,
    displayName: 'Globex admin',
  });
  await api(server.origin, '/api/iam/bindings/create', adminToken, {
    tenantId: 'globex',
    role: 'tenant-admin',
    principalId: person.id,
  });
  const globexToken = (
    await api<{ token: string }>(server.origin, '/api/iam/sessions/signIn', '', {
      tenantId: 'globex',
      email: globexAdmin.email,
      password: globexAdmin.password,
    })
  ).token;
  globexSiteId = (await compute<{ id: string }>('sites/create', { name: 'globex-dc' }, globexToken)).id;

  context = await consoleContext(browser, 'wide');
  page = await signIn(context, server.origin, server.adminEmail, server.adminPassword);
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe('the PXE discovery page', () => {
  it('lists the tenant’s sites only, and the rows candidates, then unknown, then enrolled', async () => {
    await openDiscovery(page);
    const options = await page
      .locator('select[name="site"] option')
      .evaluateAll((all) => all.map((option) => (option as HTMLOptionElement).value));
    expect(options).toContain(siteId);
    expect(options).not.toContain(globexSiteId);
    expect(await kinds(page)).toEqual([
      `candidate ${CANDIDATE_MAC}`,
      'unknown 52:54:00:00:00:98',
      'unknown 52:54:00:00:00:99',
      `enrolled ${KNOWN_MAC}`,
    ]);
    const candidate = page.locator(`tr[data-mac="${CANDIDATE_MAC}"]`);
    await expect(candidate.textContent()).resolves.toContain(`r12-u07 (${waiting.id})`);
    // Only the candidate has a button: unknown and enrolled rows are never answered from here.
    await expect(page.locator('tr[data-mac] button').count()).resolves.toBe(1);
    await expect(
      page.locator('tr[data-kind="unknown"] button, tr[data-kind="enrolled"] button').count(),
    ).resolves.toBe(0);
    await shot(page, 'discovery-rows');
  }, 120_000);

  it('Confirm asks first: dismissed binds nothing; accepted binds and the row becomes enrolled', async () => {
    const question = `Bind ${CANDIDATE_MAC} as the PXE MAC of ${waiting.id}? The machine will then boot from it.`;
    const confirm = page.getByRole('button', { name: `Confirm ${CANDIDATE_MAC} for ${waiting.id}` });
    const dismissed = answerConfirmation(page, false);
    await confirm.click();
    await expect(dismissed).resolves.toBe(question);
    // Nothing was sent: the machine has no MAC and the row is still a candidate.
    await expect(machine(waiting.id)).resolves.toMatchObject({ macs: [] });
    await expect(page.locator(`tr[data-mac="${CANDIDATE_MAC}"]`).getAttribute('data-kind')).resolves.toBe(
      'candidate',
    );

    const accepted = answerConfirmation(page, true);
    await confirm.click();
    await expect(accepted).resolves.toBe(question);
    await page.locator(`tr[data-mac="${CANDIDATE_MAC}"][data-kind="enrolled"]`).waitFor();
    await page.locator(`[role="status"][data-bound="${waiting.id}"]`).waitFor();
    await expect(machine(waiting.id)).resolves.toMatchObject({ macs: [CANDIDATE_MAC] });
    await expect(page.locator('tr[data-mac] button').count()).resolves.toBe(0);
  }, 120_000);

  it('Refresh shows what the agent saw since', async () => {
    await seen({ mac: '52:54:00:00:00:77' }, 0);
    await expect(page.locator('tr[data-mac="52:54:00:00:00:77"]').count()).resolves.toBe(0);
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.locator('tr[data-mac="52:54:00:00:00:77"][data-kind="unknown"]').waitFor();
  }, 120_000);

  it('Bind a MAC by hand: disabled until both are well formed; a CONFLICT is shown in place', async () => {
    const form = page.getByRole('form', { name: 'Bind a MAC by hand' });
    const bind = form.getByRole('button', { name: 'Bind MAC' });
    await expect(bind.isDisabled()).resolves.toBe(true);
    await form.getByLabel('Machine id (node_…)').fill('r12-u09');
    await form.getByLabel('MAC', { exact: true }).fill('52:54:00:aa:bb:09');
    // A name is not a machine id.
    await expect(bind.isDisabled()).resolves.toBe(true);
    await form.getByLabel('Machine id (node_…)').fill(labelled.id);
    await form.getByLabel('MAC', { exact: true }).fill('52:54:00:aa:bb');
    await expect(bind.isDisabled()).resolves.toBe(true);
    await form.getByLabel('MAC', { exact: true }).fill('ff:ff:ff:ff:ff:ff');
    await expect(bind.isDisabled()).resolves.toBe(true);
    // The known machine's MAC as its label has it, upper case with dashes: well formed, and taken.
    await form.getByLabel('MAC', { exact: true }).fill(KNOWN_MAC.toUpperCase().replaceAll(':', '-'));
    await expect(bind.isDisabled()).resolves.toBe(false);

    // Dismissed: nothing is sent.
    const dismissed = answerConfirmation(page, false);
    await bind.click();
    await expect(dismissed).resolves.toBe(
      `Bind ${KNOWN_MAC} as the PXE MAC of ${labelled.id}? The machine will then boot from it.`,
    );
    await expect(page.locator('[data-bind-error] [role="alert"]').count()).resolves.toBe(0);

    const accepted = answerConfirmation(page, true);
    await bind.click();
    await accepted;
    const refusal = page.locator('[data-bind-error] [role="alert"]');
    await refusal.waitFor();
    await expect(refusal.textContent()).resolves.toContain('CONFLICT');
    await expect(refusal.textContent()).resolves.toContain(known.id);
    await expect(machine(labelled.id)).resolves.toMatchObject({ macs: [] });
    await shot(page, 'discovery-by-hand-conflict');

    // A machine that has its MAC already: INVALID_STATE, in the same place.
    await form.getByLabel('Machine id (node_…)').fill(known.id);
    await form.getByLabel('MAC', { exact: true }).fill('52:54:00:aa:bb:10');
    const again = answerConfirmation(page, true);
    await bind.click();
    await again;
    await expect.poll(() => refusal.textContent()).toContain('INVALID_STATE');
  }, 120_000);

  it('fits 375 px', async () => {
    const phone = await consoleContext(browser, 'narrow');
    try {
      const small = await signIn(phone, server.origin, server.adminEmail, server.adminPassword);
      await openDiscovery(small);
      await small.getByRole('form', { name: 'Bind a MAC by hand' }).waitFor();
      await expect(overflows(small)).resolves.toBe(false);
      await expect(small.getByRole('button', { name: 'Refresh' }).isVisible()).resolves.toBe(true);
      await shot(small, 'discovery-375');
    } finally {
      await phone.close();
    }
  }, 120_000);
});
