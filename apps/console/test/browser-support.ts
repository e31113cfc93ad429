/**
 * The console's browser tests run the real server.mjs (Next.js build, Better IAM, Better Compute)
 * on a fresh PostgreSQL database, with simulated machines in the root tenant's pool, and drive it in
 * Debian's Chromium through playwright-core. One browser serves the whole suite.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { expect } from 'vitest';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';

export const appDir = join(import.meta.dirname, '..');
export const screenshotsDir = join(appDir, 'test-results', 'screenshots');
const CHROMIUM = '/usr/bin/chromium';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

export interface ConsoleProcess {
  origin: string;
  dataDir: string;
  adminEmail: string;
  adminPassword: string;
  output(): string;
  stop(): Promise<void>;
}

/** Runs `node server.mjs …` in apps/console until it prints `ready`; returns its output so far on failure. */
export function runServer(
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
): Promise<{ child: ChildProcess; output: () => string }> {
  const child = spawn(process.execPath, ['server.mjs', ...args], {
    cwd: appDir,
    env: { PATH: process.env.PATH ?? '', NEXT_TELEMETRY_DISABLED: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + 90_000;
    const check = setInterval(() => {
      if (ready.test(output)) {
        clearInterval(check);
        resolve({ child, output: () => output });
      } else if (child.exitCode !== null || Date.now() > deadline) {
        clearInterval(check);
        child.kill('SIGKILL');
        reject(
          new Error(
            `server.mjs ${child.exitCode !== null ? `exited ${child.exitCode}` : 'was not ready in time'}:\n${output}`,
          ),
        );
      }
    }, 50);
  });
}

/** The console in dev mode on a fresh database, with `machines` simulated machines. */
export async function startConsole(
  machines: number,
  env: Record<string, string> = {},
): Promise<ConsoleProcess & { database: TestDatabase }> {
  const database = await createTestDatabase('postgres');
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'console-data-'));
  const { child, output } = await runServer(
    ['--dev', '--built', '--port', String(port), '--sim', String(machines)],
    { BETTER_COMPUTE_DATABASE_URL: database.url!, CONSOLE_DATA_DIR: dataDir, ...env },
    /simulated machine\(s\) in pool/,
  );
  const password = /its password, shown this once: (\S+)/.exec(output())?.[1];
  if (!password) throw new Error(`no administrator password in the output:\n${output()}`);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    origin: `http://127.0.0.1:${port}`,
    dataDir,
    adminEmail: 'admin@console.local',
    adminPassword: password,
    output,
    database,
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
      }
      await database.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export function launchBrowser(): Promise<Browser> {
  mkdirSync(screenshotsDir, { recursive: true });
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
  });
}

/** Signs in through the login page; resolves on the reservations page. */
export async function signIn(
  context: BrowserContext,
  origin: string,
  email: string,
  password: string,
  org?: string,
): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${origin}/login${org ? `?org=${org}` : ''}`);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${origin}/reservations`);
  return page;
}

/** Calls an API of the console with a bearer token (none when empty), as a program would. */
export async function api<T>(
  origin: string,
  path: string,
  token: string,
  input: Record<string, unknown>,
): Promise<T> {
  const response = await fetch(`${origin}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(input),
  });
  const body = (await response.json()) as { data?: T; error?: { code: string; message: string } };
  if (!body.data) throw new Error(`${path}: ${body.error?.code}: ${body.error?.message}`);
  return body.data;
}

/** The code a compute call answers with `token` (`OK` when it succeeds): how a test checks the API refuses what a page disables. */
export async function computeCodeOf(
  origin: string,
  path: string,
  input: Record<string, unknown>,
  token: string,
): Promise<string> {
  const response = await fetch(`${origin}/api/compute/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(input),
  });
  const body = (await response.json()) as { error?: { code: string } };
  return body.error?.code ?? 'OK';
}

/** A whole-page screenshot kept as a test artefact under test-results/screenshots. */
export const screenshot = (page: Page, name: string) =>
  page.screenshot({ path: join(screenshotsDir, `${name}.png`), fullPage: true });

/** What the terminal panel says of its tunnel (Connected, or how it ended). */
export const panelStatus = (page: Page) =>
  page.getByRole('region', { name: /^Terminal:/ }).getByRole('status');

/** The terminal's text as xterm.js renders it into the page. */
export const screenText = (page: Page) => page.locator('.xterm-rows').innerText();

/** Whether the page scrolls sideways (what a page must not do at 375 px). */
export const overflowsSideways = (page: Page) =>
  page.evaluate(() => document.documentElement.scrollWidth > document.documentElement.clientWidth);

const axeSource = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** axe-core's serious and critical violations on the page as it is now, one line each. */
export async function axeViolations(page: Page): Promise<string[]> {
  await page.addScriptTag({ path: axeSource });
  const { found, passed } = await page.evaluate(async () => {
    const axe = (
      globalThis as unknown as { axe: { run(): Promise<{ violations: AxeViolation[]; passes: unknown[] }> } }
    ).axe;
    const results = await axe.run();
    return { found: results.violations, passed: results.passes.length };
  });
  // axe ran its rules on the page: some of them pass on any page with content.
  if (passed === 0) throw new Error(`axe checked nothing on ${page.url()}`);
  return found
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

/** What IdRef shows of an id (ui.tsx's shortId): `pool_…7Q2ZKD`, the prefix and last six characters. */
function shortIdOf(id: string): string {
  const cut = id.indexOf('_');
  const body = cut === -1 ? id : id.slice(cut + 1);
  return body.length <= 10 ? id : `${id.slice(0, cut + 1)}…${body.slice(-6)}`;
}

/** The buttons in `scope` that act: every one but the short ids' toggles (IdRef's are buttons too). */
export const actionButtons = (scope: Locator) =>
  scope.getByRole('button').and(scope.locator('button:not(.id)'));

/**
 * The first IdRef of `id` in `scope` shows `name` (when given) beside the short id, says so to a
 * reader ("<short> (<name>): press for the full id"), and one press shows the full id, another the
 * short one again.
 */
export async function expectIdRef(scope: Locator, id: string, name?: string): Promise<void> {
  const ref = scope.locator(`.id-ref[data-id="${id}"]`).first();
  const short = shortIdOf(id);
  if (name !== undefined)
    await expect.poll(() => ref.locator('.id-name').textContent(), { timeout: 15_000 }).toBe(name);
  const toggle = ref.getByRole('button', {
    name: `${short}${name === undefined ? '' : ` (${name})`}: press for the full id`,
    exact: true,
  });
  await expect(ref.locator('code').textContent()).resolves.toBe(short);
  await toggle.click();
  await expect(ref.locator('code').textContent()).resolves.toBe(id);
  await expect(ref.getByRole('button').getAttribute('aria-expanded')).resolves.toBe('true');
  await ref.getByRole('button').click();
  await expect(ref.locator('code').textContent()).resolves.toBe(short);
}

/** A session token of the console's root administrator, for calls a test makes as a program would. */
export async function adminSessionToken(server: ConsoleProcess): Promise<string> {
  const signedIn = await api<{ token: string }>(server.origin, '/api/iam/sessions/signIn', '', {
    tenantId: 'root',
    email: server.adminEmail,
    password: server.adminPassword,
  });
  return signedIn.token;
}

/**
 * A person of `tenantId` (root by default) bound to `role` there, made through IAM's API as an
 * administrator would; resolves to the person's id and session token.
 */
export async function personWithRole(
  server: ConsoleProcess,
  adminToken: string,
  who: { email: string; password: string; displayName: string },
  role: string,
  tenantId = 'root',
): Promise<{ id: string; token: string }> {
  const person = await api<{ id: string }>(server.origin, '/api/iam/principals/create', adminToken, {
    tenantId,
    kind: 'person',
    email: who.email,
    password: who.password,
    displayName: who.displayName,
  });
  await api(server.origin, '/api/iam/bindings/create', adminToken, {
    tenantId,
    role,
    principalId: person.id,
  });
  const signedIn = await api<{ token: string }>(server.origin, '/api/iam/sessions/signIn', '', {
    tenantId,
    email: who.email,
    password: who.password,
  });
  return { id: person.id, token: signedIn.token };
}

/**
 * A new tenant and its administrator (a person bound to tenant-admin there: every compute action
 * but compute:fleet:admin, in that tenant only); resolves to the person's session token.
 */
export async function tenantAdministrator(
  server: ConsoleProcess,
  adminToken: string,
  tenant: { id: string; name: string },
  who: { email: string; password: string },
): Promise<string> {
  await api(server.origin, '/api/iam/tenants/create', adminToken, tenant);
  const administrator = { ...who, displayName: `${tenant.name} administrator` };
  return (await personWithRole(server, adminToken, administrator, 'tenant-admin', tenant.id)).token;
}

/** The widths every page is tried at: a desktop and a phone. */
export const VIEWPORTS = {
  wide: { width: 1440, height: 900 },
  narrow: { width: 375, height: 800 },
} as const;

/** A browser context at a width of VIEWPORTS, waiting up to 20 s for what a test looks for. */
export async function consoleContext(
  browser: Browser,
  width: keyof typeof VIEWPORTS,
  options: { acceptDownloads?: boolean } = {},
): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport: VIEWPORTS[width], ...options });
  context.setDefaultTimeout(20_000);
  return context;
}
