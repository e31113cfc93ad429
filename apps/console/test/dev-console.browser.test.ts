/**
 * The console under `better-compute dev` (issue 31, item 4): the real binary, in a directory of its
 * own, serves the pages on its API's origin, in its process, over its database and embedded Better
 * IAM. dev's own accounts sign in with the passwords dev wrote to .better-compute/dev.json and see
 * dev's simulated fleet; the pages carry the security headers and no other origin can frame them;
 * the API's paths answer as they did without the console; and --no-console leaves the API alone.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appDir, freePort, launchBrowser, screenshotsDir, signIn } from './browser-support.js';

const BIN = join(appDir, '..', '..', 'packages', 'better-compute', 'bin', 'better-compute.cjs');

interface DevAccount {
  tenantId: string;
  email: string;
  password: string;
  apiKey: string;
}

interface DevRun {
  child: ChildProcess;
  origin: string;
  output(): string;
  /** Milliseconds from the start until the API first answered. */
  apiAnsweredAfterMs: number;
  /** Milliseconds from the start until the sign-in page first answered (-1: not asked, --no-console). */
  pageAnsweredAfterMs: number;
  stop(): Promise<number | null>;
}

/**
 * Starts `better-compute dev` in `cwd` on a free port and waits for it to print its last start-up
 * line ("try: …"), noting when its API, then its sign-in page, first answered.
 */
async function startDev(cwd: string, args: string[]): Promise<DevRun> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const startedAt = Date.now();
  // A clean environment: no configuration, database URL or telemetry setting leaks in from the
  // test's own, so dev runs PGlite in cwd and turns Next.js's telemetry off by itself.
  const child = spawn(process.execPath, [BIN, 'dev', '--port', String(port), ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', HOME: cwd },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let apiAnsweredAfterMs = -1;
  let pageAnsweredAfterMs = -1;
  const withPages = !args.includes('--no-console');
  const deadline = Date.now() + 180_000;
  while (!/^try: /m.test(output) || apiAnsweredAfterMs < 0 || (withPages && pageAnsweredAfterMs < 0)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(
        `dev ${child.exitCode !== null ? `exited ${child.exitCode}` : 'did not start in time'}:\n${output}`,
      );
    }
    if (apiAnsweredAfterMs < 0) {
      const answered = await fetch(`${origin}/api/compute/system/version`, { method: 'POST', body: '{}' })
        .then((response) => response.ok)
        .catch(() => false);
      if (answered) apiAnsweredAfterMs = Date.now() - startedAt;
    } else if (withPages && pageAnsweredAfterMs < 0) {
      const answered = await fetch(`${origin}/login`)
        .then((response) => response.status === 200)
        .catch(() => false);
      if (answered) pageAnsweredAfterMs = Date.now() - startedAt;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    child,
    origin,
    output: () => output,
    apiAnsweredAfterMs,
    pageAnsweredAfterMs,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

/** dev's resident memory, in MiB, from /proc. */
function residentMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)![1]) / 1024;
}

const cwd = mkdtempSync(join(tmpdir(), 'bc-dev-console-'));
let dev: DevRun;
let browser: Browser;
let accounts: Record<'rootAdmin' | 'acmeAdmin' | 'acmeMember', DevAccount>;

beforeAll(async () => {
  [dev, browser] = await Promise.all([startDev(cwd, ['--sim', '2']), launchBrowser()]);
  accounts = JSON.parse(readFileSync(join(cwd, '.better-compute', 'dev.json'), 'utf8'));
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await dev?.stop();
  rmSync(cwd, { recursive: true, force: true });
});

/** Every error the page logs about its policy or scripts, collected while it is open. */
function policyErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' || /Content Security Policy|Permissions-Policy/i.test(message.text()))
      errors.push(message.text());
  });
  page.on('pageerror', (error) => errors.push(error.message));
  return errors;
}

describe('better-compute dev serves the console on its own origin', () => {
  it('says where to sign in, and the sign-in page answers within seconds of the API', async () => {
    expect(dev.output()).toContain(`console: ${dev.origin}/login (production build)`);
    expect(dev.apiAnsweredAfterMs).toBeGreaterThan(0);
    expect(dev.pageAnsweredAfterMs).toBeGreaterThan(0);
    const pageAfterApiMs = dev.pageAnsweredAfterMs - dev.apiAnsweredAfterMs;
    process.stdout.write(
      `dev's API answered after ${dev.apiAnsweredAfterMs} ms; its sign-in page ${pageAfterApiMs} ms later\n`,
    );
    // The goal is 5 s on a quiet machine; the bound only catches a console that never comes up.
    expect(pageAfterApiMs).toBeLessThan(60_000);
    const page = await browser.newPage();
    const started = Date.now();
    await page.goto(`${dev.origin}/login`);
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    process.stdout.write(`the sign-in page, in Chromium: ${Date.now() - started} ms\n`);
    await page.close();
  });

  it("acme's administrator signs in with the password in dev.json and sees dev's GPU pool offered to acme", async () => {
    const context = await browser.newContext();
    context.setDefaultTimeout(15_000);
    const { email, password } = accounts.acmeAdmin;
    const page = await signIn(context, dev.origin, email, password, 'acme');
    const errors = policyErrors(page);
    await page.goto(`${dev.origin}/capacity`);
    await page.getByRole('heading', { level: 1, name: 'Capacity and pools' }).waitFor();
    await page.getByText('sim-gpu').first().waitFor();
    await page.locator('[data-live="open"]').waitFor();
    await page.screenshot({ path: join(screenshotsDir, 'dev-acme-capacity.png'), fullPage: true });
    expect(errors).toEqual([]);
    await context.close();
  });

  it("the root administrator signs in and sees every one of dev's simulated machines on the nodes page", async () => {
    const listed = await fetch(`${dev.origin}/api/compute/nodes/list`, {
      method: 'POST',
      headers: { authorization: `Bearer ${accounts.rootAdmin.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ tenantId: 'root' }),
    });
    const nodes = ((await listed.json()) as { data: { items: { id: string }[] } }).data.items;
    // Two in the GPU pool and two in the VPS pool beside it.
    expect(nodes).toHaveLength(4);
    const context = await browser.newContext();
    context.setDefaultTimeout(15_000);
    const { email, password } = accounts.rootAdmin;
    const page = await signIn(context, dev.origin, email, password);
    const errors = policyErrors(page);
    await page.goto(`${dev.origin}/nodes`);
    await page.locator('tr[data-node]').nth(3).waitFor();
    const shown = await page
      .locator('tr[data-node]')
      .evaluateAll((rows) => rows.map((row) => row.getAttribute('data-node')));
    expect(shown.sort()).toEqual(nodes.map((node) => node.id).sort());
    await page.screenshot({ path: join(screenshotsDir, 'dev-root-nodes.png'), fullPage: true });
    expect(errors).toEqual([]);
    await context.close();
  });

  it('pages carry the security headers', async () => {
    const response = await fetch(`${dev.origin}/login`);
    expect(response.status).toBe(200);
    const csp = response.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("object-src 'none'");
    // The production build evaluates no strings as code; only development mode's hot reload does.
    expect(csp).not.toContain('unsafe-eval');
    expect(response.headers.get('x-frame-options')).toBe('DENY');
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    expect(response.headers.get('referrer-policy')).toBe('same-origin');
    expect(response.headers.get('permissions-policy')).toContain('camera=()');
    expect(response.headers.get('x-powered-by')).toBeNull();
  });

  it('a page on another origin cannot frame the console', async () => {
    // The other origin: another loopback port, serving a page that frames the console's sign-in.
    const framing: Server = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/html' });
      response.end(
        `<!doctype html><title>elsewhere</title><iframe id="c" src="${dev.origin}/login" onload="document.title='loaded'"></iframe>`,
      );
    });
    await new Promise<void>((resolve) => framing.listen(0, '127.0.0.1', resolve));
    const address = framing.address();
    const elsewhere = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    const page = await browser.newPage();
    const refusals: string[] = [];
    page.on('console', (message) => refusals.push(message.text()));
    try {
      await page.goto(elsewhere);
      // The frame's load event fires for the error page that replaces a refused document too.
      await page.waitForFunction(() => document.title === 'loaded', undefined, { timeout: 15_000 });
      const frame = page.frames().find((candidate) => candidate !== page.mainFrame())!;
      expect(frame).toBeDefined();
      // The console's document never ran in the frame: no sign-in form, and not its URL.
      expect(frame.url().startsWith(dev.origin)).toBe(false);
      expect(await frame.locator('input[type="password"]').count()).toBe(0);
      expect(refusals.join('\n')).toMatch(/frame-ancestors|X-Frame-Options/);
    } finally {
      await page.close();
      await new Promise<void>((resolve) => framing.close(() => resolve()));
    }
  });

  it("the API's paths answer as without the console", async () => {
    // An unknown API path is the API's 404 envelope, never a page.
    const unknown = await fetch(`${dev.origin}/api/compute/no-such-route`, { method: 'POST', body: '{}' });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
    // Better IAM at /api/iam, decided as before.
    const session = await fetch(`${dev.origin}/api/iam/sessions/get`, { method: 'POST', body: '{}' });
    expect(session.headers.get('content-type')).toMatch(/^application\/json/);
    // The event stream's path outside /api (dev's default live path) stays the stream's.
    const stream = await fetch(`${dev.origin}/watch`, {
      headers: { authorization: `Bearer ${accounts.acmeMember.apiKey}` },
    });
    expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
    await stream.body?.cancel();
    // And no API answer carries the pages' headers.
    expect(unknown.headers.get('content-security-policy')).toBeNull();
  });

  it('dev with its console stays under 1 GB resident', async () => {
    const mib = residentMiB(dev.child.pid!);
    process.stdout.write(`dev's resident memory after the pages above: ${mib.toFixed(0)} MiB\n`);
    expect(mib).toBeLessThan(1024);
  });
});

describe('better-compute dev --no-console', () => {
  it('serves the API alone: a page path is the API’s 404, and SIGINT stops it cleanly', async () => {
    const own = mkdtempSync(join(tmpdir(), 'bc-dev-noconsole-'));
    try {
      const api = await startDev(own, ['--memory', '--no-console']);
      try {
        expect(api.output()).not.toContain('console:');
        const page = await fetch(`${api.origin}/login`);
        expect(page.status).toBe(404);
        expect(((await page.json()) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
      } finally {
        expect(await api.stop()).toBe(0);
      }
    } finally {
      rmSync(own, { recursive: true, force: true });
    }
  }, 240_000);

  it('refuses --console-dev with --no-console, saying why', async () => {
    const child = spawn(process.execPath, [BIN, 'dev', '--no-console', '--console-dev'], {
      cwd,
      env: { PATH: process.env.PATH ?? '', HOME: cwd },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (chunk) => (output += chunk));
    child.stderr!.on('data', (chunk) => (output += chunk));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(2);
    expect(output).toContain(
      'INVALID_ARGUMENT: --console-dev runs the console, which --no-console turns off',
    );
    expect(output).toMatch(/hint: /);
  });
});

describe('stopping dev', () => {
  it('SIGINT ends dev and its console', async () => {
    expect(await dev.stop()).toBe(0);
  }, 120_000);
});
