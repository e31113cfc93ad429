/**
 * The Sites and projects page in a real Chromium against the real server.mjs on PostgreSQL: the
 * administrator creates a site and a project through the forms (the API then has them), edits the
 * site, deletes it after a confirmation, archives the project after one; a site made through the
 * API appears live; the server's refusals of a name (a malformed one, INVALID_ARGUMENT with its
 * issue, and a taken one, ALREADY_EXISTS) are shown on the Name field. A viewer of the tenant reads
 * both lists at 375 px with every button disabled, and the API refuses the call too. A tenant
 * administrator of another tenant (acme) sees only acme's sites and projects, with no platform
 * pages, and may press what they administer: creates, edits and deletes an acme site through the
 * forms (the API agrees, and the root tenant never sees it).
 */
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

interface Site {
  id: string;
  name: string;
  region: string | null;
  description: string;
  version: number;
}
interface Project {
  id: string;
  name: string;
  state: string;
}

const viewer = { email: 'sites-viewer@console.local', password: 'viewer-password-2026' };

let server: ConsoleProcess;
let browser: Browser;
let adminContext: BrowserContext;
let viewerContext: BrowserContext;
let page: Page;
let adminToken: string;
let viewerToken: string;

const compute = <T>(path: string, input: Record<string, unknown>, token = adminToken) =>
  api<T>(server.origin, `/api/compute/${path}`, token, input);

const codeOf = (path: string, input: Record<string, unknown>, token: string) =>
  computeCodeOf(server.origin, path, input, token);

const shot = screenshot;
const overflows = overflowsSideways;

beforeAll(async () => {
  [server, browser] = await Promise.all([startConsole(1), launchBrowser()]);
  adminToken = await adminSessionToken(server);
  viewerToken = (
    await personWithRole(server, adminToken, { ...viewer, displayName: 'Sites viewer' }, 'viewer')
  ).token;
  adminContext = await consoleContext(browser, 'wide');
  viewerContext = await consoleContext(browser, 'narrow');
  page = await signIn(adminContext, server.origin, server.adminEmail, server.adminPassword);
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe('the Sites and projects page', () => {
  it('is in the navigation; a site made through the API appears live', async () => {
    await page.getByRole('link', { name: 'Sites and projects' }).click();
    await page.waitForURL(`${server.origin}/sites`);
    await page.getByRole('heading', { level: 1, name: 'Sites and projects' }).waitFor();
    await page.locator('[data-live="open"]').waitFor();
    await page.getByRole('heading', { name: 'Projects', exact: true }).waitFor();
    // Let the sites list load before the site is made, so it arrives through the stream.
    await page.locator('tr[data-site]').first().or(page.getByText('No sites yet.')).waitFor();
    const made = await compute<Site>('sites/create', { name: 'made-by-api', region: 'eu-west' });
    const row = page.locator(`tr[data-site="${made.id}"]`);
    await row.waitFor();
    await expect(row.locator('[data-site-name]').textContent()).resolves.toBe('made-by-api');
    await expect(row.textContent()).resolves.toContain('eu-west');
  }, 120_000);

  it("the server's refusal of a name is shown on the Name field", async () => {
    const form = page.getByRole('form', { name: 'New site' });
    // Sent as typed: the server's schema refuses it, and its issue lands on the field.
    await form.getByLabel('Name').fill('Bad Name!');
    await form.getByRole('button', { name: 'Create site' }).click();
    const nameError = form.locator('[data-field-error="name"]');
    await nameError.waitFor();
    await expect(nameError.textContent()).resolves.toBe(
      'must be 1-63 lowercase letters, digits and dashes, starting with a letter or digit',
    );
    await expect(form.getByLabel('Name').getAttribute('aria-invalid')).resolves.toBe('true');
    // A name the tenant holds: ALREADY_EXISTS, on the same field.
    await form.getByLabel('Name').fill('made-by-api');
    await form.getByRole('button', { name: 'Create site' }).click();
    await expect.poll(() => nameError.textContent()).toBe('a site named made-by-api exists');
    await shot(page, 'sites-field-error');
  }, 120_000);

  it('creates, edits and deletes a site through the forms; the API agrees at each step', async () => {
    const form = page.getByRole('form', { name: 'New site' });
    await form.getByLabel('Name').fill('rack-row-a');
    await form.getByLabel('Region').fill('us-east');
    await form.getByLabel('Description').fill('the first row');
    // The form is drawn from sites.create's schema: labels are there because the method takes them,
    // and each field's help is the method table's description.
    await expect(form.getByLabel('Name').getAttribute('title')).resolves.toBe(
      'A name: 1-63 lowercase letters, digits and dashes, unique in its tenant',
    );
    await form.getByLabel('Labels').fill('zone=a\nexample.com/rack=12');
    await form.getByRole('button', { name: 'Create site' }).click();
    await expect.poll(() => form.getByLabel('Name').inputValue()).toBe('');
    await expect(form.locator('[data-field-error]').count()).resolves.toBe(0);
    const listed = await compute<{ items: Site[] }>('sites/list', { limit: 50 });
    const site = listed.items.find((item) => item.name === 'rack-row-a')!;
    expect(site).toMatchObject({
      region: 'us-east',
      description: 'the first row',
      labels: { zone: 'a', 'example.com/rack': '12' },
      version: 1,
    });
    const row = page.locator(`tr[data-site="${site.id}"]`);
    await row.waitFor();

    await row.getByRole('button', { name: 'Edit rack-row-a' }).click();
    const edit = page.getByRole('form', { name: 'Edit site rack-row-a' });
    await edit.getByLabel('Name').fill('rack-row-b');
    await edit.getByLabel('Region').fill('');
    await edit.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => row.locator('[data-site-name]').textContent()).toBe('rack-row-b');
    const updated = await compute<Site>('sites/get', { siteId: site.id });
    expect(updated).toMatchObject({
      name: 'rack-row-b',
      region: null,
      description: 'the first row',
      version: 2,
    });

    await row.getByRole('button', { name: 'Delete rack-row-b' }).click();
    const dialog = page.getByRole('dialog');
    await expect(dialog.textContent()).resolves.toContain(`Delete the site rack-row-b (${site.id})?`);
    await dialog.getByRole('button', { name: 'Delete site' }).click();
    await row.waitFor({ state: 'detached' });
    await expect(codeOf('sites/get', { siteId: site.id }, adminToken)).resolves.toBe('NOT_FOUND');
  }, 120_000);

  it('creates a project and archives it after a confirmation; the filter shows it archived', async () => {
    const form = page.getByRole('form', { name: 'New project' });
    await form.getByLabel('Name').fill('vision-research');
    await form.getByLabel('Description').fill('image models');
    await form.getByRole('button', { name: 'Create project' }).click();
    await expect.poll(() => form.getByLabel('Name').inputValue()).toBe('');
    const listed = await compute<{ items: Project[] }>('projects/list', {});
    const project = listed.items.find((item) => item.name === 'vision-research')!;
    expect(project.state).toBe('active');
    const row = page.locator(`tr[data-project="${project.id}"]`);
    await row.waitFor();
    await expect(row.locator('[data-project-name]').textContent()).resolves.toBe('vision-research');
    await expect(overflows(page)).resolves.toBe(false);
    await shot(page, 'sites-1440');

    await row.getByRole('button', { name: 'Archive vision-research' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Archive project' }).click();
    // Active projects show by default: the archived one leaves the list.
    await row.waitFor({ state: 'detached' });
    expect((await compute<Project>('projects/get', { projectId: project.id })).state).toBe('archived');
    await page.getByRole('form', { name: 'Filter projects' }).getByLabel('Show').selectOption('archived');
    await expect.poll(() => row.locator('td[data-state]').getAttribute('data-state')).toBe('archived');
    // The server's refusal of a project name lands on its field too.
    await form.getByLabel('Name').fill('vision-research');
    await form.getByRole('button', { name: 'Create project' }).click();
    const nameError = form.locator('[data-field-error="name"]');
    await nameError.waitFor();
    await expect(nameError.textContent()).resolves.toBe('a project named vision-research exists');
  }, 120_000);

  it('a viewer reads both lists at 375 px with every button disabled, and the API refuses too', async () => {
    const site = await compute<Site>('sites/create', { name: 'viewer-sees-this' });
    const project = await compute<Project>('projects/create', { name: 'viewer-project' });
    const viewerPage = await signIn(viewerContext, server.origin, viewer.email, viewer.password);
    await viewerPage.goto(`${server.origin}/sites`);
    const row = viewerPage.locator(`tr[data-site="${site.id}"]`);
    await row.waitFor();
    const remove = row.getByRole('button', { name: 'Delete viewer-sees-this' });
    await expect.poll(() => remove.getAttribute('title')).toBe('Your roles do not allow this');
    await expect(remove.isDisabled()).resolves.toBe(true);
    await expect(row.getByRole('button', { name: 'Edit viewer-sees-this' }).isDisabled()).resolves.toBe(true);
    const projectRow = viewerPage.locator(`tr[data-project="${project.id}"]`);
    const archive = projectRow.getByRole('button', { name: 'Archive viewer-project' });
    await expect.poll(() => archive.getAttribute('title')).toBe('Your roles do not allow this');
    await expect(archive.isDisabled()).resolves.toBe(true);
    const newSite = viewerPage.getByRole('form', { name: 'New site' });
    await newSite.getByLabel('Name').fill('not-allowed');
    const create = newSite.getByRole('button', { name: 'Create site' });
    await expect.poll(() => create.getAttribute('title')).toBe('Your roles do not allow this');
    await expect(create.isDisabled()).resolves.toBe(true);
    await expect(overflows(viewerPage)).resolves.toBe(false);
    await shot(viewerPage, 'sites-viewer-375');
    await expect(codeOf('sites/delete', { siteId: site.id }, viewerToken)).resolves.toBe('ACCESS_DENIED');
    await expect(codeOf('projects/archive', { projectId: project.id }, viewerToken)).resolves.toBe(
      'ACCESS_DENIED',
    );
    await viewerPage.close();
  }, 120_000);

  it("a tenant administrator of acme sees only acme's sites and may create, edit and delete them", async () => {
    const acmeAdmin = { email: 'admin@acme.test', password: 'acme-admin-password-2026' };
    const acmeToken = await tenantAdministrator(server, adminToken, { id: 'acme', name: 'Acme' }, acmeAdmin);
    const rootSite = await compute<Site>('sites/create', { name: 'root-only-site' });
    const context = await consoleContext(browser, 'wide');
    const acmePage = await signIn(context, server.origin, acmeAdmin.email, acmeAdmin.password, 'acme');
    await acmePage.getByRole('heading', { name: 'Tenant acme' }).waitFor();
    await expect(acmePage.getByRole('heading', { name: 'Platform' }).count()).resolves.toBe(0);
    await acmePage.getByRole('link', { name: 'Sites and projects' }).click();
    await acmePage.waitForURL(`${server.origin}/sites`);
    await acmePage.getByText('No sites yet.').waitFor();
    await expect(acmePage.locator(`tr[data-site="${rootSite.id}"]`).count()).resolves.toBe(0);

    const form = acmePage.getByRole('form', { name: 'New site' });
    await form.getByLabel('Name').fill('acme-row');
    const create = form.getByRole('button', { name: 'Create site' });
    await expect.poll(() => create.isEnabled()).toBe(true);
    await create.click();
    await expect.poll(() => form.getByLabel('Name').inputValue()).toBe('');
    const acmeSites = await compute<{ items: Site[] }>('sites/list', { limit: 50 }, acmeToken);
    const site = acmeSites.items.find((item) => item.name === 'acme-row')!;
    expect(site).toBeDefined();
    const rootSites = await compute<{ items: Site[] }>('sites/list', { limit: 50 });
    expect(rootSites.items.map((item) => item.id)).not.toContain(site.id);

    const row = acmePage.locator(`tr[data-site="${site.id}"]`);
    await row.waitFor();
    const edit = row.getByRole('button', { name: 'Edit acme-row' });
    const remove = row.getByRole('button', { name: 'Delete acme-row' });
    await expect.poll(() => remove.isEnabled()).toBe(true);
    await edit.click();
    const editForm = acmePage.getByRole('form', { name: 'Edit site acme-row' });
    await editForm.getByLabel('Region').fill('eu-central');
    await editForm.getByRole('button', { name: 'Save' }).click();
    await expect
      .poll(async () => (await compute<Site>('sites/get', { siteId: site.id }, acmeToken)).region)
      .toBe('eu-central');
    await remove.click();
    await acmePage.getByRole('dialog').getByRole('button', { name: 'Delete site' }).click();
    await row.waitFor({ state: 'detached' });
    await expect(codeOf('sites/get', { siteId: site.id }, acmeToken)).resolves.toBe('NOT_FOUND');
    // The root tenant's site is not theirs to change.
    await expect(codeOf('sites/delete', { siteId: rootSite.id }, acmeToken)).resolves.not.toBe('OK');
    await shot(acmePage, 'sites-tenant-admin-1440');
    await context.close();
  }, 120_000);
});
