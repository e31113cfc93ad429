/**
 * The console in a real Chromium against the real server.mjs on PostgreSQL: sign-in, pages over live
 * data, reserve and release with the confirmation, live updates in a second context, a person
 * without the right seeing the button disabled while the API refuses too, the cookie's CSRF rule,
 * --prod refusing to start without its secrets, and no 5xx for malformed cookies, NUL or huge values.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHmac } from 'node:crypto';
import { connect } from 'node:net';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import {
  adminSessionToken,
  api,
  expectIdRef,
  launchBrowser,
  runServer,
  screenshotsDir,
  signIn,
  startConsole,
  type ConsoleProcess,
  personWithRole,
} from './browser-support.js';

let server: ConsoleProcess;
let browser: Browser;
let adminToken: string;
let adminContext: BrowserContext;
let adminPage: Page;
const viewer = { email: 'viewer@console.local', password: 'viewer-password-2026' };

beforeAll(async () => {
  [server, browser] = await Promise.all([startConsole(3), launchBrowser()]);
  adminToken = await adminSessionToken(server);
  await personWithRole(server, adminToken, { ...viewer, displayName: 'Viewer' }, 'viewer');
  adminContext = await browser.newContext();
  adminContext.setDefaultTimeout(10_000);
  adminPage = await signIn(adminContext, server.origin, server.adminEmail, server.adminPassword);
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

const shot = (page: Page, name: string) =>
  page.screenshot({ path: join(screenshotsDir, `${name}.png`), fullPage: true });

async function cookieHeader(): Promise<string> {
  const cookies = await adminContext.cookies(server.origin);
  return cookies.map((cookie) => `${cookie.name}=${cookie.value}`).join('; ');
}

describe('signing in', () => {
  it('a page without a session sends the browser to /login', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${server.origin}/nodes`);
    await page.waitForURL(`${server.origin}/login`);
    await shot(page, 'login');
    await context.close();
  });

  it('a wrong password is said in plain words and nothing is signed in', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${server.origin}/login`);
    await page.getByLabel('Email').fill(server.adminEmail);
    await page.getByLabel('Password').fill('not-the-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    const error = page.locator('div.error');
    await error.waitFor();
    await expect(error.textContent()).resolves.toMatch(/UNAUTHENTICATED/);
    expect(page.url()).toBe(`${server.origin}/login`);
    await context.close();
  });

  it('signed in, the navigation shows the live badge once the stream is open', async () => {
    await adminPage.locator('[data-live="open"]').waitFor();
    await expect(adminPage.getByRole('link', { name: 'Tenants' }).count()).resolves.toBe(1);
    await shot(adminPage, 'reservations');
  });
});

/** The current RFC 6238 code of a base32 secret (SHA-1, 30 s, 6 digits), as an authenticator shows it. */
function totpCode(secret: string): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = '';
  for (const char of secret.replace(/=+$/, '').toUpperCase())
    bits += alphabet.indexOf(char).toString(2).padStart(5, '0');
  const key = Buffer.from(bits.match(/.{8}/g)!.map((byte) => parseInt(byte, 2)));
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(Date.now() / 30_000)));
  const mac = createHmac('sha1', key).update(counter).digest();
  const offset = mac[mac.length - 1]! & 0xf;
  return String((mac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000).padStart(6, '0');
}

describe('a person with a second factor', () => {
  it('is asked for the code after the password, and signs in with a recovery code', async () => {
    const email = 'mfa@console.local';
    const password = 'mfa-password-2026';
    await api(server.origin, '/api/iam/principals/create', adminToken, {
      kind: 'person',
      email,
      password,
      displayName: 'MFA',
    });
    const session = await api<{ token: string }>(server.origin, '/api/iam/sessions/signIn', '', {
      tenantId: 'root',
      email,
      password,
    });
    const enrolled = await api<{ secret: string }>(server.origin, '/api/iam/totp/enroll', session.token, {});
    const confirmed = await api<{ recoveryCodes: string[] }>(
      server.origin,
      '/api/iam/totp/confirm',
      session.token,
      {
        code: totpCode(enrolled.secret),
      },
    );
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${server.origin}/login`);
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const code = page.getByLabel('Code from your authenticator (or a recovery code)');
    await code.waitFor();
    await code.fill(confirmed.recoveryCodes[0]!);
    await page.getByRole('button', { name: 'Verify' }).click();
    await page.waitForURL(`${server.origin}/reservations`);
    await context.close();
  });
});

describe('a tenant’s member', () => {
  it('signs in at /login?org=, acts in that tenant, and has no platform pages', async () => {
    await api(server.origin, '/api/iam/tenants/create', adminToken, { id: 'acme', name: 'Acme' });
    const member = await api<{ id: string }>(server.origin, '/api/iam/principals/create', adminToken, {
      tenantId: 'acme',
      kind: 'person',
      email: 'member@acme.test',
      password: 'member-password-2026',
      displayName: 'Acme member',
    });
    await api(server.origin, '/api/iam/bindings/create', adminToken, {
      tenantId: 'acme',
      role: 'member',
      principalId: member.id,
    });
    const context = await browser.newContext();
    const page = await signIn(context, server.origin, 'member@acme.test', 'member-password-2026', 'acme');
    await page.getByRole('heading', { name: 'Tenant acme' }).waitFor();
    await expect(page.getByRole('link', { name: 'Tenants' }).count()).resolves.toBe(0);
    const platform = await page.goto(`${server.origin}/platform/tenants`);
    expect(platform?.status()).toBe(404);
    await context.close();
  });
});

describe('pages over live data', () => {
  it('the nodes page lists the simulated machines', async () => {
    await adminPage.getByRole('link', { name: 'Nodes' }).click();
    await adminPage.waitForURL(`${server.origin}/nodes`);
    // Three in the GPU pool and two in the VPS pool beside it.
    await adminPage.locator('tr[data-node]').nth(4).waitFor();
    expect(await adminPage.locator('tr[data-node]').count()).toBe(5);
    await shot(adminPage, 'nodes');
  });

  it('names pools by name and ids by their short form, the full id one press away', async () => {
    const row = adminPage.locator('tr[data-node]').first();
    const nodeId = (await row.getAttribute('data-node'))!;
    const pool = row.locator('td').nth(1).locator('.id-ref');
    const poolId = (await pool.getAttribute('data-id'))!;
    // The simulated machines' pools are sim-gpu and sim-vps.
    await expect.poll(() => pool.locator('.id-name').textContent()).toMatch(/^sim-(gpu|vps)$/);
    const short = `${poolId.slice(0, poolId.indexOf('_') + 1)}…${poolId.slice(-6)}`;
    await expect(pool.locator('code').textContent()).resolves.toBe(short);
    const nodeRef = row.locator(`.id-ref[data-id="${nodeId}"]`);
    await expect(nodeRef.locator('code').textContent()).resolves.not.toBe(nodeId);
    await nodeRef.getByRole('button').click();
    await expect(nodeRef.locator('code').textContent()).resolves.toBe(nodeId);
    await expect(nodeRef.getByRole('button').getAttribute('aria-expanded')).resolves.toBe('true');
    await nodeRef.getByRole('button').click();
    await expect(nodeRef.locator('code').textContent()).resolves.not.toBe(nodeId);
  });

  it('capacity, events, webhooks, people and tenants render', async () => {
    for (const [path, heading] of [
      ['/capacity', 'Capacity and pools'],
      ['/joining', 'Joining machines'],
      ['/events', 'Events'],
      ['/webhooks', 'Webhooks'],
      ['/iam', 'People and keys'],
      ['/platform/tenants', 'Tenants'],
    ] as const) {
      await adminPage.goto(`${server.origin}${path}`);
      await adminPage.getByRole('heading', { level: 1, name: heading }).waitFor();
      await adminPage.locator('[aria-busy="true"]').first().waitFor({ state: 'detached' });
      await shot(adminPage, path.slice(1).replaceAll('/', '-'));
    }
    await adminPage.goto(`${server.origin}/capacity`);
    await adminPage.locator('td[data-free]').first().waitFor();
  });
});

describe('node actions', () => {
  it('cordon, label and drain (asked first) change the row in place', async () => {
    await adminPage.goto(`${server.origin}/nodes`);
    const row = adminPage.locator('tr[data-node]').last();
    await row.waitFor();
    const name = (await row.locator('strong').textContent())!;
    await row.getByRole('button', { name: `Cordon ${name}` }).click();
    await row.locator('td[data-state="cordoned"]').waitFor();
    await row.getByRole('button', { name: `Uncordon ${name}` }).click();
    await row.locator('td[data-state="ready"]').waitFor();
    await row.getByLabel('Label (key=value)').fill('rack=r12');
    await row.getByRole('button', { name: 'Set label' }).click();
    await row.getByText('rack=r12').waitFor();
    await row.getByRole('button', { name: `Drain ${name}` }).click();
    const dialog = adminPage.getByRole('dialog');
    await expect(dialog.textContent()).resolves.toContain(`Drain ${name} (`);
    await dialog.getByRole('button', { name: 'Drain node' }).click();
    await expect
      .poll(() => row.locator('td[data-state]').getAttribute('data-state'), { timeout: 10_000 })
      .toMatch(/^(draining|drained)$/);
  });
});

describe('joining machines', () => {
  it('a join token made here is shown once, then revoked after the confirmation', async () => {
    await adminPage.goto(`${server.origin}/joining`);
    await adminPage.locator('select[name="tokenPool"] option').first().waitFor({ state: 'attached' });
    await adminPage.getByRole('button', { name: 'Create token' }).click();
    const once = adminPage.locator('.once');
    await once.waitFor();
    const id = /Join token (jt_\w+|\S+), shown this once/.exec((await once.textContent()) ?? '')![1]!;
    const revoke = adminPage.getByRole('button', { name: `Revoke ${id}` });
    await revoke.click();
    await adminPage.getByRole('dialog').getByRole('button', { name: 'Revoke token' }).click();
    await expect.poll(() => revoke.isDisabled()).toBe(true);
    await adminPage.getByRole('cell', { name: 'revoked' }).first().waitFor();
  });
});

describe('webhooks', () => {
  it('a new webhook’s signing secret is shown once, and it lists with its events', async () => {
    await adminPage.goto(`${server.origin}/webhooks`);
    const form = adminPage.getByRole('form', { name: 'New webhook' });
    // The form is webhooks.create's schema: a malformed event pattern is the server's refusal, on its field.
    await form.getByLabel('Endpoint URL').fill('http://127.0.0.1:9/hook');
    await form.getByLabel('Event types').fill('reservation.*\nnot a pattern');
    await form.getByRole('button', { name: 'Add webhook' }).click();
    await form.locator('[data-field-error="events"]').waitFor();
    await form.getByLabel('Event types').fill('reservation.*\nnode.*');
    await form.getByRole('button', { name: 'Add webhook' }).click();
    const once = adminPage.locator('.once');
    await adminPage.locator('.once, div.error').first().waitFor();
    expect(await adminPage.locator('div.error').allTextContents()).toEqual([]);
    await expect(once.textContent()).resolves.toMatch(/shown this once: whsec_\S+/);
    await adminPage.getByRole('cell', { name: 'reservation.*, node.*' }).waitFor();
    await adminPage.reload();
    await adminPage.getByRole('cell', { name: 'reservation.*, node.*' }).waitFor();
    await expect(adminPage.locator('.once').count()).resolves.toBe(0);
  });
});

describe('reservations', () => {
  let reservationId: string;

  it('reserves from the preview, and a second context sees it appear without a reload', async () => {
    const watcher = await browser.newContext({ storageState: await adminContext.storageState() });
    const watching = await watcher.newPage();
    await watching.goto(`${server.origin}/reservations`);
    await watching.locator('[data-live="open"]').waitFor();

    await adminPage.goto(`${server.origin}/reservations`);
    await adminPage.locator('select[name="pool"] option').first().waitFor({ state: 'attached' });
    await adminPage.getByLabel('GPUs', { exact: true }).fill('2');
    await adminPage.getByRole('button', { name: 'Preview' }).click();
    await expect(adminPage.getByTestId('preview').textContent()).resolves.toMatch(/^Fits now on node_/);
    await adminPage.getByRole('button', { name: 'Reserve', exact: true }).click();
    const status = adminPage.getByText(/^Reserved rsv_/);
    await status.waitFor();
    reservationId = /Reserved (rsv_\w+)/.exec((await status.textContent()) ?? '')![1]!;

    const row = watching.locator(`tr[data-reservation="${reservationId}"]`);
    await row.waitFor({ timeout: 10_000 });
    await expect(row.locator('td[data-state]').textContent()).resolves.toMatch(/^active/);
    await shot(watching, 'reservations-live');
    await watcher.close();
  });

  it('release asks first, naming what happens, and then releases', async () => {
    const row = adminPage.locator(`tr[data-reservation="${reservationId}"]`);
    const release = row.getByRole('button', { name: `Release ${reservationId}` });
    await expect(release.isEnabled()).resolves.toBe(true);
    await release.click();
    const dialog = adminPage.getByRole('dialog');
    await expect(dialog.textContent()).resolves.toContain(
      `Release reservation ${reservationId} now? Its 2 GPU(s) go back`,
    );
    await shot(adminPage, 'release-confirmation');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await expect(row.locator('td[data-state]').textContent()).resolves.toMatch(/^active/);
    await release.click();
    await adminPage.getByRole('dialog').getByRole('button', { name: 'Release GPUs' }).click();
    await row.locator('td[data-state="ended"]').waitFor();
    await expect(row.locator('td[data-state]').textContent()).resolves.toContain('released');
    await expect(release.isDisabled()).resolves.toBe(true);
  });

  it('a person without the right sees Release disabled, and the API refuses it too', async () => {
    const pools = await api<{ items: { id: string }[] }>(
      server.origin,
      '/api/compute/pools/list',
      adminToken,
      {},
    );
    const held = await api<{ id: string }>(server.origin, '/api/compute/reservations/create', adminToken, {
      poolId: pools.items[0]!.id,
      gpus: 1,
      durationSeconds: 3600,
    });
    const context = await browser.newContext();
    const page = await signIn(context, server.origin, viewer.email, viewer.password);
    const row = page.locator(`tr[data-reservation="${held.id}"]`);
    await row.waitFor();
    const release = row.getByRole('button', { name: `Release ${held.id}` });
    await expect
      .poll(() => release.getAttribute('title'), { timeout: 10_000 })
      .toBe('Your roles do not allow this');
    await expect(release.isDisabled()).resolves.toBe(true);
    await shot(page, 'reservations-viewer');
    const answer = await page.evaluate(async (reservationId) => {
      const response = await fetch('/api/compute/reservations/release', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-better-compute': '1' },
        body: JSON.stringify({ reservationId }),
      });
      return { status: response.status, body: (await response.json()) as { error?: { code: string } } };
    }, held.id);
    expect(answer.status).toBe(403);
    expect(answer.body.error?.code).toBe('ACCESS_DENIED');
    await context.close();
  });
});

describe('instances', () => {
  it('creates an instance on the simulated VPS pool, sees it run live, then stops and deletes it after asking', async () => {
    const pools = await api<{ items: { id: string; name: string }[] }>(
      server.origin,
      '/api/compute/pools/list',
      adminToken,
      { class: 'vps' },
    );
    const poolId = pools.items.find((pool) => pool.name === 'sim-vps')!.id;
    await api(server.origin, '/api/compute/flavors/create', adminToken, {
      poolId,
      name: 'small',
      vcpus: 1,
      memoryMiB: 512,
      diskGiB: 2,
    });
    // Simulated nodes fetch nothing: the image is a catalog entry whose disk they pretend to verify.
    await api(server.origin, '/api/compute/images/register', adminToken, {
      name: 'debian-12',
      source: 'https://images.example.com/debian-12.qcow2',
      diskFormat: 'qcow2',
      sha256: 'a'.repeat(64),
      sizeBytes: 2 ** 30,
      os: 'debian',
    });
    const page = await adminContext.newPage();
    await page.goto(`${server.origin}/instances`);
    const form = page.getByRole('form', { name: 'New instance' });
    await form.getByLabel('Pool').selectOption({ label: 'sim-vps' });
    await form.locator('select[name="flavor"] option').first().waitFor({ state: 'attached' });
    await form.locator('select[name="image"] option').first().waitFor({ state: 'attached' });
    await form.getByLabel('Host name').fill('web-1');
    // A private key never leaves the page: the button stays disabled with the reason shown.
    const create = form.getByRole('button', { name: 'Create instance' });
    await form.getByLabel('SSH public key (optional)').fill('-----BEGIN OPENSSH PRIVATE KEY-----');
    await expect(create.isDisabled()).resolves.toBe(true);
    await page.getByText('Paste one OpenSSH public key line').waitFor();
    await form.getByLabel('SSH public key (optional)').fill('');
    await expect.poll(() => create.isEnabled()).toBe(true);
    // Outbound internet is on unless unticked; unticked, the instance is made without egress.
    const egress = form.getByLabel('Outbound internet (NAT)');
    await expect(egress.isChecked()).resolves.toBe(true);
    await egress.uncheck();
    await create.click();
    const row = page.locator('tr[data-instance]').filter({ hasText: 'web-1' });
    // Created provisioning; the simulated node boots it and the row turns running without a reload.
    await row.locator('td[data-state="running"]').waitFor({ timeout: 20_000 });
    const id = (await row.getAttribute('data-instance'))!;
    const made = await api<{ egress: boolean }>(server.origin, '/api/compute/instances/get', adminToken, {
      instanceId: id,
    });
    expect(made.egress).toBe(false);
    await shot(page, 'instances');
    // A simulated node runs no daemon to attach a console: the panel says so in the server's words.
    await row.getByRole('button', { name: `Console of ${id}` }).click();
    const terminal = page.getByRole('region', { name: 'Terminal: the serial console of web-1' });
    await terminal.getByRole('status').filter({ hasText: 'Not connected.' }).waitFor();
    await expect(terminal.textContent()).resolves.toMatch(/daemon|session|reach/i);
    await terminal.getByRole('button', { name: 'Close the terminal' }).click();
    await row.getByRole('button', { name: `Stop ${id}` }).click();
    const stopDialog = page.getByRole('dialog');
    await expect(stopDialog.textContent()).resolves.toContain('asked to power off');
    await stopDialog.getByRole('button', { name: 'Stop instance' }).click();
    await row.locator('td[data-state="stopped"]').waitFor({ timeout: 20_000 });
    await expect.poll(() => row.getByRole('button', { name: `Start ${id}` }).isEnabled()).toBe(true);
    await row.getByRole('button', { name: `Delete ${id}` }).click();
    const deleteDialog = page.getByRole('dialog');
    await expect(deleteDialog.textContent()).resolves.toContain('its disk is removed for good');
    await deleteDialog.getByRole('button', { name: 'Delete instance' }).click();
    await row.locator('td[data-state="deleted"]').waitFor({ timeout: 20_000 });
    await page.close();
  }, 120_000);
});

describe('images and flavors', () => {
  it('promotes an image to another channel, and creates a flavor on a VPS pool then deletes it after asking', async () => {
    // The instances test above registered debian-12 (testing) and the flavor small on sim-vps.
    const page = await adminContext.newPage();
    await page.goto(`${server.origin}/catalog`);
    const image = page.locator('tr[data-image]').filter({ hasText: 'debian-12' });
    await image.locator('td[data-channel="testing"]').waitFor();
    await image.getByLabel('To').selectOption('stable');
    await image.getByRole('button', { name: /^Promote debian-12/ }).click();
    await image.locator('td[data-channel="stable"]').waitFor();
    const form = page.getByRole('form', { name: 'New flavor' });
    await form.getByLabel('Pool').selectOption({ label: 'sim-vps' });
    await page.locator('tr[data-flavor]').filter({ hasText: 'small' }).waitFor();
    await form.getByLabel('Name').fill('medium');
    await form.getByLabel('vCPUs').fill('2');
    await form.getByLabel('Memory (MiB)').fill('2048');
    await form.getByRole('button', { name: 'Create flavor' }).click();
    const medium = page.locator('tr[data-flavor]').filter({ hasText: 'medium' });
    await expect(medium.textContent()).resolves.toContain('2 vCPU, 2048 MiB');
    await shot(page, 'catalog');
    await medium.getByRole('button', { name: 'Delete medium' }).click();
    const dialog = page.getByRole('dialog');
    await expect(dialog.textContent()).resolves.toContain('New instances can no longer use it');
    await dialog.getByRole('button', { name: 'Delete flavor' }).click();
    await medium.waitFor({ state: 'detached' });
    await page.close();
  }, 120_000);
});

describe('sandboxes and volumes', () => {
  it('a template keeps a warm sandbox, a create claims it, +30 min lengthens it, delete asks first; a volume grows and is wiped after asking', async () => {
    const pools = await api<{ items: { id: string; name: string }[] }>(
      server.origin,
      '/api/compute/pools/list',
      adminToken,
      { class: 'vps' },
    );
    const poolId = pools.items.find((pool) => pool.name === 'sim-vps')!.id;
    await api(server.origin, '/api/compute/flavors/create', adminToken, {
      poolId,
      name: 'sandbox-small',
      vcpus: 1,
      memoryMiB: 512,
      diskGiB: 2,
    });
    await api(server.origin, '/api/compute/images/register', adminToken, {
      name: 'debian-12-sandbox',
      source: 'https://images.example.com/debian-12-sandbox.qcow2',
      diskFormat: 'qcow2',
      sha256: 'b'.repeat(64),
      sizeBytes: 2 ** 30,
      os: 'debian',
    });
    const page = await adminContext.newPage();
    await page.goto(`${server.origin}/sandboxes`);
    const templateForm = page.getByRole('form', { name: 'New template' });
    await templateForm.getByLabel('Name').fill('py');
    await templateForm.getByLabel('Pool').selectOption({ label: 'sim-vps' });
    await templateForm.getByLabel('Flavor').selectOption({ label: 'sandbox-small' });
    await templateForm.getByLabel('Image').selectOption({ label: 'debian-12-sandbox' });
    await templateForm.getByLabel('Warm minimum').fill('1');
    await templateForm.getByRole('button', { name: 'Create template' }).click();
    const template = page.locator('tr[data-template]').filter({ hasText: 'py' });
    // The warm pool fills on the simulated node, and the row follows it live.
    await template.locator('td[data-warm="1/1"]').waitFor({ timeout: 30_000 });

    const form = page.getByRole('form', { name: 'New sandbox' });
    await form.getByLabel('Template').selectOption({ label: 'py' });
    await form.getByRole('button', { name: 'Create sandbox' }).click();
    const row = page.locator('tr[data-sandbox]').first();
    await row.locator('td[data-state="running"]').waitFor({ timeout: 30_000 });
    await expect(row.textContent()).resolves.toContain('from the warm pool');
    const id = (await row.getAttribute('data-sandbox'))!;
    await expect(row.textContent()).resolves.toContain(`better-compute sandbox exec ${id}`);
    const leftBefore = Number(await row.locator('[data-left]').getAttribute('data-left'));
    await row.getByRole('button', { name: `Extend ${id} by 30 minutes` }).click();
    await expect
      .poll(async () => Number(await row.locator('[data-left]').getAttribute('data-left')), {
        timeout: 10_000,
      })
      .toBeGreaterThan(leftBefore + 1700);
    await shot(page, 'sandboxes');
    await row.getByRole('button', { name: `Delete ${id}` }).click();
    const dialog = page.getByRole('dialog');
    await expect(dialog.textContent()).resolves.toContain('its snapshots go too unless they were kept');
    await dialog.getByRole('button', { name: 'Delete sandbox' }).click();
    await row
      .locator('td[data-state="deleted"], td[data-state="deleting"]')
      .first()
      .waitFor({ timeout: 20_000 });
    await page.close();

    const volumes = await adminContext.newPage();
    await volumes.goto(`${server.origin}/volumes`);
    const volumeForm = volumes.getByRole('form', { name: 'New volume' });
    await volumeForm.getByLabel('Pool').selectOption({ label: 'sim-vps' });
    await volumeForm.getByLabel('Name').fill('Bad Name');
    await volumes.getByText('Lower-case letters, digits').waitFor();
    await volumeForm.getByLabel('Name').fill('agent-notes');
    await volumeForm.getByLabel('Size (GiB)').fill('10');
    await volumeForm.getByRole('button', { name: 'Create volume' }).click();
    const volume = volumes.locator('tr[data-volume]').filter({ hasText: 'agent-notes' });
    await volume.locator('td[data-state="ready"]').waitFor({ timeout: 20_000 });
    const volumeId = (await volume.getAttribute('data-volume'))!;
    await volume.getByLabel('Grow to (GiB)').fill('20');
    await volume.getByRole('button', { name: `Grow ${volumeId}` }).click();
    await volume.getByText('20 GiB').waitFor({ timeout: 20_000 });
    await volume.locator('td[data-state="ready"]').waitFor({ timeout: 20_000 });
    await volume.getByRole('button', { name: `Delete ${volumeId}` }).click();
    const wipe = volumes.getByRole('dialog');
    await expect(wipe.textContent()).resolves.toContain('Its data is wiped');
    await wipe.getByRole('button', { name: 'Delete volume' }).click();
    await volume
      .locator('td[data-state="deleted"], td[data-state="deleting"]')
      .first()
      .waitFor({ timeout: 20_000 });
    await volumes.close();
  }, 120_000);
});

describe('break-glass SSH on a node’s page', () => {
  it('needs a second factor; with one, a certificate is shown once, listed as who holds access, and revoked after asking', async () => {
    const nodes = await api<{ items: { id: string; name: string }[] }>(
      server.origin,
      '/api/compute/nodes/list',
      adminToken,
      {},
    );
    const node = nodes.items[0]!;
    const keyDir = mkdtempSync(join(tmpdir(), 'console-key-'));
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'ops', '-f', join(keyDir, 'id')]);
    const publicKey = readFileSync(join(keyDir, 'id.pub'), 'utf8').trim();
    rmSync(keyDir, { recursive: true, force: true });

    // The administrator signed in with a password only: the API refuses, and the page says why.
    const page = await adminContext.newPage();
    await page.goto(`${server.origin}/nodes/${node.id}`);
    const form = page.getByRole('form', { name: 'Issue an SSH certificate' });
    await form.getByLabel('Your public key').fill('-----BEGIN OPENSSH PRIVATE KEY-----');
    await page.getByText('That is a private key').waitFor();
    await expect(form.getByRole('button', { name: 'Issue certificate' }).isDisabled()).resolves.toBe(true);
    await form.getByLabel('Your public key').fill(publicKey);
    await form.getByRole('button', { name: 'Issue certificate' }).click();
    await page.getByText('needs a session opened with a second factor').waitFor();
    await page.close();

    // A platform operator who signed in with a second factor gets the certificate.
    const email = 'ops-mfa@console.local';
    const password = 'ops-mfa-password-2026';
    const person = await api<{ id: string }>(server.origin, '/api/iam/principals/create', adminToken, {
      kind: 'person',
      email,
      password,
      displayName: 'Ops',
    });
    await api(server.origin, '/api/iam/bindings/create', adminToken, {
      role: 'platform-admin',
      principalId: person.id,
    });
    const session = await api<{ token: string }>(server.origin, '/api/iam/sessions/signIn', '', {
      tenantId: 'root',
      email,
      password,
    });
    const enrolled = await api<{ secret: string }>(server.origin, '/api/iam/totp/enroll', session.token, {});
    const confirmed = await api<{ recoveryCodes: string[] }>(
      server.origin,
      '/api/iam/totp/confirm',
      session.token,
      { code: totpCode(enrolled.secret) },
    );
    const context = await browser.newContext();
    context.setDefaultTimeout(10_000);
    const ops = await context.newPage();
    await ops.goto(`${server.origin}/login`);
    await ops.getByLabel('Email').fill(email);
    await ops.getByLabel('Password').fill(password);
    await ops.getByRole('button', { name: 'Sign in' }).click();
    const code = ops.getByLabel('Code from your authenticator (or a recovery code)');
    await code.waitFor();
    await code.fill(confirmed.recoveryCodes[0]!);
    await ops.getByRole('button', { name: 'Verify' }).click();
    await ops.waitForURL(`${server.origin}/reservations`);
    await ops.goto(`${server.origin}/nodes/${node.id}`);
    const opsForm = ops.getByRole('form', { name: 'Issue an SSH certificate' });
    await opsForm.getByLabel('Your public key').fill(publicKey);
    await opsForm.getByLabel('Lifetime').selectOption('5');
    await opsForm.getByRole('button', { name: 'Issue certificate' }).click();
    const once = ops.locator('.once');
    await once.waitFor();
    const certificate = (await once.locator('pre').textContent())!;
    expect(certificate).toMatch(/^ssh-ed25519-cert-v01@openssh\.com /);
    const row = ops.locator('tr[data-ssh-cert]').first();
    await row.locator('td[data-state="active"]').waitFor();
    await expect(row.textContent()).resolves.toContain(`root@${node.id}`);
    await shot(ops, 'break-glass');
    const id = (await row.getAttribute('data-ssh-cert'))!;
    // The certificate's id is short, the full one a press away, in its row and in the issue notice.
    await expectIdRef(row, id);
    await expectIdRef(once, id);
    await row.getByRole('button', { name: `Revoke ${id}` }).click();
    const dialog = ops.getByRole('dialog');
    await expect(dialog.textContent()).resolves.toContain('refuses it from its next login');
    await dialog.getByRole('button', { name: 'Revoke certificate' }).click();
    await row.locator('td[data-state="revoked"]').waitFor();
    await expect(row.textContent()).resolves.toContain('revoked from the console');
    await context.close();
  }, 120_000);
});

describe('the session cookie on the APIs', () => {
  const call = async (path: string, headers: Record<string, string>, method = 'POST') => {
    const response = await fetch(`${server.origin}${path}`, {
      method,
      headers: { 'content-type': 'application/json', cookie: await cookieHeader(), ...headers },
      ...(method === 'POST' ? { body: '{}' } : {}),
    });
    return { status: response.status, text: await response.text() };
  };

  it('is taken with X-Better-Compute: 1 from the console’s own origin', async () => {
    const answer = await call('/api/compute/nodes/list', { 'x-better-compute': '1', origin: server.origin });
    expect(answer.status).toBe(200);
  });

  it('is refused without X-Better-Compute, or from a foreign Origin, on compute and on IAM', async () => {
    for (const path of ['/api/compute/nodes/list', '/api/iam/sessions/get']) {
      const bare = await call(path, { origin: server.origin });
      expect(bare.status).toBe(403);
      expect(JSON.parse(bare.text).error.details.reason).toBe('csrf');
      const foreign = await call(path, { 'x-better-compute': '1', origin: 'https://evil.example' });
      expect(foreign.status).toBe(403);
      expect(JSON.parse(foreign.text).error.details.reason).toBe('csrf');
    }
    const stream = await call('/api/compute/watch', { 'sec-fetch-site': 'cross-site' }, 'GET');
    expect(stream.status).toBe(403);
  });
});

describe('the pages’ security headers', () => {
  it('every page, signed in or not, forbids framing, sniffing and powerful features; the APIs keep theirs', async () => {
    for (const [path, cookie] of [
      ['/login', ''],
      ['/nodes', ''],
      ['/nodes', await cookieHeader()],
    ] as const) {
      const response = await fetch(`${server.origin}${path}`, { redirect: 'manual', headers: { cookie } });
      expect(response.status, path).toBeLessThan(400);
      expect(response.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
      expect(response.headers.get('x-frame-options')).toBe('DENY');
      expect(response.headers.get('x-content-type-options')).toBe('nosniff');
      expect(response.headers.get('referrer-policy')).toBe('same-origin');
      expect(response.headers.get('permissions-policy')).toContain('microphone=()');
    }
    const api = await fetch(`${server.origin}/api/compute/system/version`, { method: 'POST', body: '{}' });
    expect(api.status).toBe(200);
    expect(api.headers.get('content-security-policy')).toBeNull();
  });
});

/** A raw HTTP/1.1 exchange, so headers node's fetch would refuse (NUL, huge) reach the server. */
function rawRequest(
  port: number,
  head: string,
  body = '',
  declaredLength = Buffer.byteLength(body),
): Promise<number> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () =>
      socket.write(`${head}\r\ncontent-length: ${declaredLength}\r\nconnection: close\r\n\r\n${body}`),
    );
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk));
    // The server may answer (413) and close before a huge body is all written: the answer counts.
    socket.on('error', () => {});
    socket.on('close', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0)));
  });
}

describe('malformed input never gets a 5xx', () => {
  it('answers malformed cookies, NUL bytes and huge values with 4xx (or a redirect to sign in)', async () => {
    const port = Number(new URL(server.origin).port);
    const host = `host: 127.0.0.1:${port}`;
    const cookies = [
      'better-iam.session=%',
      'better-iam.session=%zz%00',
      'better-iam.session=biam_ses_\u0000x',
      `better-iam.session=${'a'.repeat(12_000)}`,
      'better-iam.session=',
      '=;;=;better-iam.session',
    ];
    const statuses: number[] = [];
    for (const cookie of cookies) {
      for (const [method, path] of [
        ['GET', '/reservations'],
        ['GET', '/platform/tenants'],
        ['POST', '/api/compute/nodes/list'],
        ['POST', '/api/iam/sessions/get'],
        ['GET', '/api/compute/watch'],
      ] as const) {
        statuses.push(
          await rawRequest(
            port,
            `${method} ${path} HTTP/1.1\r\n${host}\r\ncookie: ${cookie}\r\nx-better-compute: 1\r\norigin: ${server.origin}\r\ncontent-type: application/json`,
            method === 'POST' ? '{}' : '',
          ),
        );
      }
    }
    statuses.push(
      await rawRequest(
        port,
        `POST /api/compute/sites/create HTTP/1.1\r\n${host}\r\nauthorization: Bearer ${adminToken}\r\ncontent-type: application/json`,
        '{"name":"a\\u0000b"}',
      ),
    );
    statuses.push(
      await rawRequest(
        port,
        `POST /api/compute/sites/create HTTP/1.1\r\n${host}\r\nauthorization: Bearer ${adminToken}\r\ncontent-type: application/json`,
        '{"name":"',
        50_000_000,
      ),
    );
    statuses.push(await rawRequest(port, `GET /reservations?org=${'%00'.repeat(2000)} HTTP/1.1\r\n${host}`));
    statuses.push(await rawRequest(port, `GET /login?org=${'x'.repeat(20_000)} HTTP/1.1\r\n${host}`));
    statuses.push(await rawRequest(port, `GET /api/compute/%2e%2e/iam/sessions/get HTTP/1.1\r\n${host}`));
    expect(
      statuses.every((status) => status >= 200 && status < 500),
      JSON.stringify(statuses),
    ).toBe(true);
    expect(statuses.filter((status) => status === 0)).toEqual([]);
  });
});

describe('server.mjs --dev', () => {
  it('keeps the secrets it made in its data directory, readable by its user only', () => {
    const secret = join(server.dataDir, 'secret');
    expect(statSync(secret).mode & 0o777).toBe(0o600);
    expect(statSync(server.dataDir).mode & 0o777).toBe(0o700);
    // The password is printed once and stored nowhere.
    expect(readFileSync(secret, 'utf8')).not.toContain(server.adminPassword);
  });
});

describe('server.mjs --prod', () => {
  it('refuses to start without its secrets, naming the ones missing', async () => {
    const started = runServer(
      ['--prod', '--port', '1'],
      { CONSOLE_ORIGIN: 'https://console.example.com' },
      /console: http/,
    );
    await expect(started).rejects.toThrow(
      /exited 2[\s\S]*CONSOLE_SECRET, CONSOLE_ADMIN_PASSWORD, BETTER_COMPUTE_DATABASE_URL, CONSOLE_IAM_DATABASE_URL are not set/,
    );
  });

  it('refuses weak or inconsistent settings without quoting a secret', async () => {
    const base = {
      CONSOLE_ORIGIN: 'https://console.example.com',
      CONSOLE_SECRET: 's'.repeat(40),
      CONSOLE_ADMIN_PASSWORD: 'a-long-admin-password',
      BETTER_COMPUTE_DATABASE_URL: 'postgres://db/compute',
      CONSOLE_IAM_DATABASE_URL: 'postgres://db/compute',
    };
    const cases: [Record<string, string>, RegExp][] = [
      [{ CONSOLE_SECRET: 'short-secret' }, /CONSOLE_SECRET must be at least 32 characters/],
      [{ CONSOLE_ORIGIN: 'https://console.example.com/app' }, /CONSOLE_ORIGIN must be an origin only/],
      [{ CONSOLE_IAM_DATABASE_URL: 'postgres://db/iam' }, /must name the same database/],
    ];
    for (const [change, message] of cases) {
      const started = runServer(['--prod', '--port', '1'], { ...base, ...change }, /console: http/);
      const error = await started.then(
        () => new Error('started'),
        (refusal: Error) => refusal,
      );
      expect(error.message).toMatch(message);
      expect(error.message).not.toContain('short-secret');
      expect(error.message).not.toContain('a-long-admin-password');
    }
  });
});
