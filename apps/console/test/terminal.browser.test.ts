/**
 * Terminals in the browser, with real parts: the console's own server (dev mode, production build)
 * is the gateway a real `bcd` joins, and terminals open in the page over the tunnel route,
 * authenticated by the session cookie from the console's origin. The node's root console: what is
 * typed into xterm.js runs in a real shell on this machine and is read back from the page. An
 * instance's serial console: a real QEMU guest (TCG here) booted from the project's image, whose
 * login prompt shows in the page. One guest for the suite.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ensureGuestImage,
  guestImageRegistration,
  killInstanceVm,
} from '../../../packages/better-compute/test/guest-support.js';
import { bcd, bcdJoin, type Proc, until } from '../../../packages/daemon/test/daemon-support.js';
import {
  adminSessionToken,
  api,
  type ConsoleProcess,
  launchBrowser,
  panelStatus,
  screenText,
  screenshotsDir,
  signIn,
  startConsole,
} from './browser-support.js';

let server: ConsoleProcess;
let browser: Browser;
let daemon: Proc | undefined;
let nodeId = '';
let instanceId = '';
const scratch = mkdtempSync(join(tmpdir(), 'console-node-'));
const stateDir = join(scratch, 'state');

beforeAll(async () => {
  [server, browser] = await Promise.all([startConsole(1), launchBrowser()]);
  const token = await adminSessionToken(server);
  const call = <T>(method: string, input: Record<string, unknown>) =>
    api<T>(server.origin, `/api/compute/${method.replace('.', '/')}`, token, { tenantId: 'root', ...input });
  const site = await call<{ id: string }>('sites.create', { name: 'this-machine' });
  const pool = await call<{ id: string }>('pools.create', { siteId: site.id, name: 'real', class: 'vps' });
  const joinToken = await call<{ token: string }>('joinTokens.create', {
    poolId: pool.id,
    preApproved: true,
  });
  await bcdJoin(server.origin, joinToken.token, scratch, stateDir);
  daemon = bcd(['run', '--state-dir', stateDir]);
  await until(
    'the daemon’s session with the console',
    async () =>
      existsSync(join(stateDir, 'status.json')) &&
      JSON.parse(readFileSync(join(stateDir, 'status.json'), 'utf8')).connected === true,
    60_000,
  );
  const nodes = await call<{ items: { id: string; poolId: string }[] }>('nodes.list', { poolId: pool.id });
  nodeId = nodes.items[0]!.id;
  // An instance of the project's guest on it, booting while the browser is launched and signs in.
  const guest = await ensureGuestImage();
  const image = await call<{ id: string }>('images.register', guestImageRegistration(guest));
  const flavor = await call<{ id: string }>('flavors.create', {
    poolId: pool.id,
    name: 'small',
    vcpus: 1,
    memoryMiB: 512,
    diskGiB: 2,
  });
  instanceId = (
    await call<{ id: string }>('instances.create', {
      poolId: pool.id,
      flavorId: flavor.id,
      imageId: image.id,
      name: 'web-1',
    })
  ).id;
  instanceRunning = until(
    'the instance to run',
    async () => (await call<{ state: string }>('instances.get', { instanceId })).state === 'running',
    300_000,
  );
  instanceRunning.catch(() => {});
}, 600_000);

let instanceRunning: Promise<unknown>;

afterAll(async () => {
  killInstanceVm(stateDir, instanceId);
  daemon?.child.kill('SIGKILL');
  await browser?.close();
  await server?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

describe('a node’s root console in the browser', () => {
  it('opens over the tunnel, runs what is typed in a real shell, and says the exit status', async () => {
    // Starting the instance gives the host a new link and address (its namespace's veth), and
    // Chromium aborts what it is loading when the host's addresses change (ERR_NETWORK_CHANGED):
    // the pages are opened once the instance runs, its network in place.
    await instanceRunning;
    const context = await browser.newContext();
    context.setDefaultTimeout(20_000);
    const page = await signIn(context, server.origin, server.adminEmail, server.adminPassword);
    await page.goto(`${server.origin}/nodes/${nodeId}`);
    await page.getByRole('button', { name: 'Open the root console' }).click();
    await expect
      .poll(() => panelStatus(page).filter({ hasText: 'Connected' }).count(), { timeout: 20_000 })
      .toBe(1);
    await page.getByTestId('terminal').click();
    await page.keyboard.type('echo console-$((6*7)); stty size\n');
    await expect.poll(() => screenText(page), { timeout: 20_000 }).toContain('console-42');
    // The pty has the panel's size, not a default 80 by 24. stty's line may come a moment after echo's.
    const sizeLine = async () =>
      /(\d+) (\d+)\s*$/m.exec((await screenText(page)).split('console-42')[1] ?? '');
    await expect.poll(sizeLine, { timeout: 10_000 }).not.toBeNull();
    await page.screenshot({ path: join(screenshotsDir, 'node-console.png'), fullPage: true });
    await page.keyboard.type('exit 3\n');
    await expect
      .poll(() => panelStatus(page).innerText(), { timeout: 20_000 })
      .toContain('exited with status 3');
    await context.close();
  }, 420_000);
});

describe('an instance’s serial console in the browser', () => {
  it('shows the guest’s boot and its login prompt, and answers Enter with another', async () => {
    await instanceRunning;
    const context = await browser.newContext();
    context.setDefaultTimeout(20_000);
    const page = await signIn(context, server.origin, server.adminEmail, server.adminPassword);
    await page.goto(`${server.origin}/instances`);
    const row = page.locator(`tr[data-instance="${instanceId}"]`);
    await row.locator('td[data-state="running"]').waitFor();
    await row.getByRole('button', { name: `Console of ${instanceId}` }).click();
    await expect
      .poll(() => panelStatus(page).filter({ hasText: 'Connected' }).count(), { timeout: 20_000 })
      .toBe(1);
    // The runtime's ring replays the boot; the guest's getty prompts on its serial port.
    await expect.poll(() => screenText(page), { timeout: 60_000 }).toMatch(/web-1 login:/);
    const prompts = () => screenText(page).then((text) => text.split('web-1 login:').length - 1);
    const before = await prompts();
    await page.getByTestId('terminal').click();
    await page.keyboard.press('Enter');
    await expect.poll(prompts, { timeout: 20_000 }).toBeGreaterThan(before);
    await page.screenshot({ path: join(screenshotsDir, 'instance-console.png'), fullPage: true });
    await context.close();
  }, 360_000);
});
