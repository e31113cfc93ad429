/**
 * Every page of the console checked by axe-core in a real Chromium, signed in as the root
 * administrator over simulated machines and one enrolled bare-metal machine (and /login signed
 * out): no violation of serious or critical
 * impact (missing labels, names, contrast, landmarks, ARIA misuse). A screenshot of each page is saved.
 * Every page is then opened at 375 px and at 1,440 px: none scrolls sideways, and a screenshot of
 * each at both widths is kept (test-results/screenshots/page-<name>-<width>.png).
 */
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adminSessionToken,
  api,
  axeViolations,
  type ConsoleProcess,
  consoleContext,
  launchBrowser,
  overflowsSideways,
  screenshot,
  screenshotsDir,
  signIn,
  startConsole,
  VIEWPORTS,
} from './browser-support.js';

let server: ConsoleProcess;
let browser: Browser;
let context: BrowserContext;
let nodeId = '';

beforeAll(async () => {
  [server, browser] = await Promise.all([startConsole(2), launchBrowser()]);
  const token = await adminSessionToken(server);
  nodeId = (
    await api<{ items: { id: string }[] }>(server.origin, '/api/compute/nodes/list', token, {
      tenantId: 'root',
    })
  ).items[0]!.id;
  // A bare-metal machine, so the Machines page is checked with a row and its buttons, not only empty.
  const site = await api<{ id: string }>(server.origin, '/api/compute/sites/create', token, {
    name: 'dc-a11y',
  });
  await api(server.origin, '/api/compute/metal/enroll', token, {
    siteId: site.id,
    name: 'a11y-u01',
    bmcDriver: 'ipmi',
    bmcAddress: '10.0.0.7',
    bmcUser: 'admin',
    bmcPassword: 'bmc-pass',
    productUuid: '4c4c4544-0042-3510-8052-b4c04f4a4e31',
  });
  context = await browser.newContext();
  context.setDefaultTimeout(15_000);
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

async function check(path: string, ready: (page: Page) => Promise<unknown>, name: string, page?: Page) {
  const tab = page ?? (await context.newPage());
  await tab.goto(`${server.origin}${path}`);
  await ready(tab);
  await tab.screenshot({ path: join(screenshotsDir, `a11y-${name}.png`), fullPage: true });
  const found = await axeViolations(tab);
  await tab.close();
  return found;
}

/** Every page of the console: its path, what shows once it is ready, and its name for screenshots. */
function consolePages(): [string, (page: Page) => Promise<unknown>, string][] {
  const heading = (text: string | RegExp) => (page: Page) =>
    page.getByRole('heading', { level: 1, name: text }).waitFor();
  return [
    ['/reservations', heading('Reservations'), 'reservations'],
    ['/capacity', heading(/Capacity/), 'capacity'],
    ['/nodes', (page) => page.locator('tr').nth(1).waitFor(), 'nodes'],
    [`/nodes/${nodeId}`, (page) => page.getByRole('heading', { name: 'Break-glass SSH' }).waitFor(), 'node'],
    [
      `/nodes/${nodeId}`,
      // The node's workflows and commands once their lists have loaded (an empty list says so).
      (page) =>
        page.getByText('No commands on this node.').or(page.locator('tr[data-command]').first()).waitFor(),
      'node-operations',
    ],
    ['/sites', (page) => page.getByRole('heading', { name: 'Projects', exact: true }).waitFor(), 'sites'],
    ['/usage', (page) => page.locator('[data-usage-chart]').waitFor(), 'usage'],
    ['/instances', heading('Instances'), 'instances'],
    ['/catalog', heading('Images and flavors'), 'catalog'],
    ['/sandboxes', heading('Sandboxes'), 'sandboxes'],
    ['/volumes', heading(/Volumes/), 'volumes'],
    ['/joining', heading(/Joining/), 'joining'],
    [
      '/discovery',
      // Once the first site's discoveries have loaded (none yet says so).
      (page) => page.getByText('Nothing seen PXE-booting').or(page.locator('tr[data-mac]').first()).waitFor(),
      'discovery',
    ],
    [
      '/machines',
      // Once the machine's buttons have their IAM answer (an enabled one), so axe sees the row as it stays.
      (page) => page.locator('tr[data-machine] button:enabled', { hasText: 'Manage' }).waitFor(),
      'machines',
    ],
    ['/batches', heading('Destructive batches'), 'batches'],
    ['/approvals', heading('Agents awaiting approval'), 'approvals'],
    ['/events', heading('Events'), 'events'],
    ['/webhooks', heading('Webhooks'), 'webhooks'],
    ['/iam', heading(/People/), 'iam'],
    ['/platform/tenants', heading('Tenants'), 'tenants'],
    ['/fleet', (page) => page.locator('[data-drift-state]').waitFor(), 'fleet-drift'],
  ];
}

describe('accessibility', () => {
  it('the sign-in page has no serious or critical axe violation', async () => {
    const found = await check('/login', (page) => page.getByLabel('Email').waitFor(), 'login');
    expect(found).toEqual([]);
  }, 120_000);

  it('no page of the console has a serious or critical axe violation', async () => {
    await (await signIn(context, server.origin, server.adminEmail, server.adminPassword)).close();
    const pages = consolePages();
    const found: string[] = [];
    for (const [path, ready, name] of pages)
      for (const violation of await check(path, ready, name)) found.push(`${path}: ${violation}`);
    expect(found).toEqual([]);
  }, 180_000);

  it('every page fits 375 px and 1,440 px, with a screenshot of each at both', async () => {
    const refused: string[] = [];
    for (const width of ['narrow', 'wide'] as const) {
      const sized = await consoleContext(browser, width);
      try {
        await (await signIn(sized, server.origin, server.adminEmail, server.adminPassword)).close();
        for (const [path, ready, name] of consolePages()) {
          const tab = await sized.newPage();
          await tab.goto(`${server.origin}${path}`);
          await ready(tab);
          await screenshot(tab, `page-${name}-${VIEWPORTS[width].width}`);
          if (await overflowsSideways(tab))
            refused.push(`${path} scrolls sideways at ${VIEWPORTS[width].width} px`);
          await tab.close();
        }
      } finally {
        await sized.close();
      }
    }
    expect(refused).toEqual([]);
  }, 300_000);
});
