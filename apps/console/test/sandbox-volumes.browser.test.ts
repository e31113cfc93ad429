/**
 * Sandbox volumes on templates in a real Chromium against the real server.mjs on PostgreSQL with a
 * simulated node. The administrator, at 1,440 px: the Attach a volume form's path refused by the
 * server is shown on the Mount path field; attaching a ready volume read-only sends the template's
 * whole list (the API then has it, and the template's warm pool is off, as the form said); the
 * Volumes page shows the guest's device path and the template that mounts it by name; Detach asks
 * first and the API then has no volume on the template. A member, at 375 px: the template's Detach,
 * Delete buttons and the Attach button are disabled (the API refuses the update too), and the
 * tenant's volume shows its device path under Everyone's volumes. Both pages pass axe-core with no serious or critical
 * violation and do not scroll sideways.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adminSessionToken,
  api,
  axeViolations,
  computeCodeOf,
  consoleContext,
  type ConsoleProcess,
  launchBrowser,
  overflowsSideways,
  personWithRole,
  screenshot,
  signIn,
  startConsole,
} from './browser-support.js';

interface TemplateVolume {
  volumeId: string;
  name: string;
  path: string;
  readOnly: boolean;
}
interface Template {
  id: string;
  name: string;
  version: number;
  warm: { min: number; max: number };
  volumes: TemplateVolume[];
}
interface Volume {
  id: string;
  name: string;
  state: string;
}

const member = { email: 'volumes-member@console.local', password: 'member-password-2026' };

let server: ConsoleProcess;
let browser: Browser;
let adminContext: BrowserContext;
let memberContext: BrowserContext;
let page: Page;
let adminToken: string;
let memberToken: string;
let template: Template;
let volume: Volume;

const compute = <T>(path: string, input: Record<string, unknown>, token = adminToken) =>
  api<T>(server.origin, `/api/compute/${path}`, token, input);

/** The path the guest finds the volume at, worked out here from the id: virtio's 20-byte serial. */
const devicePath = (volumeId: string) => `/dev/disk/by-id/virtio-${volumeId.slice('vol_'.length, 24)}`;

async function readyVolume(name: string, poolId: string, token = adminToken): Promise<Volume> {
  const made = await compute<Volume>('sandboxVolumes/create', { poolId, name, sizeGiB: 5 }, token);
  // A plain wait (beforeAll has no expect.poll): the simulated node makes it ready in moments.
  for (const deadline = Date.now() + 20_000; Date.now() < deadline;) {
    const now = await compute<Volume>('sandboxVolumes/get', { volumeId: made.id }, token);
    if (now.state === 'ready') return now;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`volume ${name} was not ready in 20 s`);
}

beforeAll(async () => {
  [server, browser] = await Promise.all([startConsole(1), launchBrowser()]);
  adminToken = await adminSessionToken(server);
  const person = await personWithRole(
    server,
    adminToken,
    { ...member, displayName: 'Volumes member' },
    'member',
  );
  memberToken = person.token;
  const pools = await compute<{ items: { id: string; name: string }[] }>('pools/list', { class: 'vps' });
  const poolId = pools.items.find((pool) => pool.name === 'sim-vps')!.id;
  const flavor = await compute<{ id: string }>('flavors/create', {
    poolId,
    name: 'sandbox-small',
    vcpus: 1,
    memoryMiB: 512,
    diskGiB: 2,
  });
  const image = await compute<{ id: string }>('images/register', {
    name: 'debian-12-sandbox',
    source: 'https://images.example.com/debian-12-sandbox.qcow2',
    diskFormat: 'qcow2',
    sha256: 'c'.repeat(64),
    sizeBytes: 2 ** 30,
    os: 'debian',
  });
  // A warm pool that may grow but keeps none now: attaching a volume turns it off.
  template = await compute<Template>('sandboxTemplates/create', {
    name: 'agent',
    poolId,
    flavorId: flavor.id,
    imageId: image.id,
    warmMin: 0,
    warmMax: 2,
  });
  volume = await readyVolume('agent-notes', poolId);
  adminContext = await consoleContext(browser, 'wide');
  memberContext = await consoleContext(browser, 'narrow');
  page = await signIn(adminContext, server.origin, server.adminEmail, server.adminPassword);
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe('sandbox volumes on templates', () => {
  it("the server's refusal of a mount path is shown on the Mount path field, and nothing changes", async () => {
    await page.goto(`${server.origin}/sandboxes`);
    const form = page.getByRole('form', { name: 'Attach a volume' });
    await form.getByLabel('Template').selectOption({ label: 'agent' });
    await form.getByLabel('Volume').selectOption({ label: 'agent-notes (5 GiB)' });
    await expect(page.getByText('Attaching turns agent’s warm pool off').count()).resolves.toBe(1);
    // Checked before sending: it must start with /.
    await form.getByLabel('Mount path').fill('data');
    await form.locator('[data-field-error="path"]').getByText('must start with /').waitFor();
    const attach = form.getByRole('button', { name: 'Attach volume' });
    await expect(attach.isDisabled()).resolves.toBe(true);
    // Sent as typed: the server's schema refuses a path with .., and its issue lands on the field.
    await form.getByLabel('Mount path').fill('/data/../etc');
    await expect.poll(() => attach.isEnabled()).toBe(true);
    await attach.click();
    const pathError = form.locator('[data-field-error="path"]');
    await expect.poll(() => pathError.textContent()).toBe('must not contain ..');
    await expect(form.getByLabel('Mount path').getAttribute('aria-invalid')).resolves.toBe('true');
    const unchanged = await compute<Template>('sandboxTemplates/get', { templateId: template.id });
    expect(unchanged.volumes).toEqual([]);
    expect(unchanged.version).toBe(template.version);
    await screenshot(page, 'sandbox-volumes-field-error');
  }, 60_000);

  it('attaches a ready volume read-only; the API has it and the warm pool is off; the row lists it', async () => {
    const form = page.getByRole('form', { name: 'Attach a volume' });
    await form.getByLabel('Mount path').fill('/data');
    await form.getByLabel('Read-only').check();
    await form.getByRole('button', { name: 'Attach volume' }).click();
    await expect
      .poll(
        async () => (await compute<Template>('sandboxTemplates/get', { templateId: template.id })).volumes,
      )
      .toEqual([{ volumeId: volume.id, name: 'agent-notes', path: '/data', readOnly: true }]);
    const stored = await compute<Template>('sandboxTemplates/get', { templateId: template.id });
    expect(stored.warm).toMatchObject({ min: 0, max: 0 });
    const row = page.locator(`tr[data-template="${template.id}"]`);
    const mounted = row.locator(`[data-template-volume="${volume.id}"]`);
    await mounted.waitFor();
    await expect(mounted.textContent()).resolves.toContain('agent-notes at /data (read-only)');
    // A template with volumes keeps no warm pool: Warm +1 is off.
    await expect(row.getByRole('button', { name: 'Warm +1 agent' }).isDisabled()).resolves.toBe(true);
    // The volume is mounted now: the form offers no other ready volume of the pool.
    await page.getByText('No ready volume of this template’s pool to attach.').waitFor();
    await expect(overflowsSideways(page)).resolves.toBe(false);
    await expect(axeViolations(page)).resolves.toEqual([]);
    await screenshot(page, 'sandbox-volumes-attached-1440');
  }, 60_000);

  it('the Volumes page shows the guest device path and the template mounting it, by name', async () => {
    const volumes = await adminContext.newPage();
    await volumes.goto(`${server.origin}/volumes`);
    const row = volumes.locator(`tr[data-volume="${volume.id}"]`);
    await row.waitFor();
    await expect(row.locator('[data-device-path]').textContent()).resolves.toBe(devicePath(volume.id));
    await expect
      .poll(() => row.locator('[data-mount="agent"]').textContent())
      .toBe('agent mounts it at /data (read-only)');
    await expect(row.textContent()).resolves.toContain('sim-vps');
    await expect(overflowsSideways(volumes)).resolves.toBe(false);
    await expect(axeViolations(volumes)).resolves.toEqual([]);
    await screenshot(volumes, 'volumes-device-path-1440');
    await volumes.close();
  }, 60_000);

  it('a member at 375 px sees every template button disabled, the API refuses too; the volume shows its path', async () => {
    const memberPage = await signIn(memberContext, server.origin, member.email, member.password);
    await memberPage.goto(`${server.origin}/sandboxes`);
    const row = memberPage.locator(`tr[data-template="${template.id}"]`);
    await row.waitFor();
    const detach = row.getByRole('button', { name: 'Detach agent-notes from agent' });
    await expect.poll(() => detach.getAttribute('title')).toBe('Your roles do not allow this');
    await expect(detach.isDisabled()).resolves.toBe(true);
    const remove = row.getByRole('button', { name: 'Delete template agent' });
    await expect.poll(() => remove.getAttribute('title')).toBe('Your roles do not allow this');
    await expect(remove.isDisabled()).resolves.toBe(true);
    const attach = memberPage.getByRole('form', { name: 'Attach a volume' }).getByRole('button', {
      name: 'Attach volume',
    });
    await expect(attach.isDisabled()).resolves.toBe(true);
    await expect(overflowsSideways(memberPage)).resolves.toBe(false);
    await expect(axeViolations(memberPage)).resolves.toEqual([]);
    await screenshot(memberPage, 'sandbox-volumes-member-375');
    await expect(
      computeCodeOf(
        server.origin,
        'sandboxTemplates/update',
        { templateId: template.id, volumes: [] },
        memberToken,
      ),
    ).resolves.toBe('ACCESS_DENIED');

    // A member manages only its own volumes (compute:sandbox-volumes:*@own); the tenant's show
    // under Everyone's volumes, each with its device path.
    await memberPage.goto(`${server.origin}/volumes`);
    await memberPage.getByLabel('Everyone’s volumes').check();
    const volumeRow = memberPage.locator(`tr[data-volume="${volume.id}"]`);
    await volumeRow.waitFor();
    await expect(volumeRow.locator('[data-device-path]').textContent()).resolves.toBe(devicePath(volume.id));
    await expect(overflowsSideways(memberPage)).resolves.toBe(false);
    await expect(axeViolations(memberPage)).resolves.toEqual([]);
    await screenshot(memberPage, 'volumes-member-375');
    await memberPage.close();
  }, 90_000);

  it('Detach asks first, naming what happens; the API then has no volume on the template', async () => {
    const row = page.locator(`tr[data-template="${template.id}"]`);
    await row.getByRole('button', { name: 'Detach agent-notes from agent' }).click();
    const dialog = page.getByRole('dialog');
    await expect(dialog.textContent()).resolves.toContain(
      'Detach the volume agent-notes from the template agent?',
    );
    await expect(dialog.textContent()).resolves.toContain('its data stays on the volume');
    await dialog.getByRole('button', { name: 'Detach volume' }).click();
    await row.locator(`[data-template-volume="${volume.id}"]`).waitFor({ state: 'detached' });
    const stored = await compute<Template>('sandboxTemplates/get', { templateId: template.id });
    expect(stored.volumes).toEqual([]);
    expect(
      (await compute<Volume & { templateIds: string[] }>('sandboxVolumes/get', { volumeId: volume.id }))
        .templateIds,
    ).toEqual([]);
  }, 60_000);
});
