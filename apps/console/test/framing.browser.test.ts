/**
 * The console's Content-Security-Policy in Chromium against the real server.mjs (issue 39, item 4):
 * every page response has a nonce of its own that every script tag of the page carries, the pages
 * run with no policy violation, a handler injected without the nonce never runs, same-origin
 * WebSockets pass `connect-src 'self'` while another origin's are refused, and a page on another
 * origin cannot frame the console, signed in or not.
 */
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import type { Browser, BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  launchBrowser,
  screenshotsDir,
  signIn,
  startConsole,
  type ConsoleProcess,
} from './browser-support.js';

let server: ConsoleProcess;
let browser: Browser;
/** Another origin (another loopback port): it serves a page framing `?path=` of the console. */
let elsewhere: Server;
let elsewhereOrigin: string;

beforeAll(async () => {
  [server, browser] = await Promise.all([startConsole(1), launchBrowser()]);
  elsewhere = createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://elsewhere').searchParams.get('path') ?? '/login';
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(
      `<!doctype html><title>elsewhere</title><iframe id="c" src="${server.origin}${path}" onload="document.title='loaded'"></iframe>`,
    );
  });
  await new Promise<void>((resolve) => elsewhere.listen(0, '127.0.0.1', resolve));
  const address = elsewhere.address();
  elsewhereOrigin = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  if (elsewhere) await new Promise<void>((resolve) => elsewhere.close(() => resolve()));
});

interface Violation {
  directive: string;
  blocked: string;
}

/**
 * Watches a context's pages for what a broken policy shows: `securitypolicyviolation` events
 * (reported from a listener Chromium installs before any page script, through a binding, which no
 * policy restricts), and errors in the console or thrown by the page.
 */
async function watchPolicy(context: BrowserContext): Promise<{ violations: Violation[]; errors: string[] }> {
  const violations: Violation[] = [];
  const errors: string[] = [];
  await context.exposeFunction(
    '__reportViolation',
    (violation: Violation) => void violations.push(violation),
  );
  await context.addInitScript(() => {
    document.addEventListener(
      'securitypolicyviolation',
      (event) => {
        const report = (window as unknown as { __reportViolation(v: Violation): void }).__reportViolation;
        report({ directive: event.effectiveDirective, blocked: event.blockedURI });
      },
      true,
    );
  });
  context.on('page', (page) => {
    page.on('console', (message) => {
      // The console has no icon: the browser's own guess at /favicon.ico is not the page's doing.
      if (message.location().url.endsWith('/favicon.ico')) return;
      if (message.type() === 'error' || /Content Security Policy/i.test(message.text()))
        errors.push(`${message.text()} (${message.location().url})`);
    });
    page.on('pageerror', (error) => errors.push(error.message));
  });
  return { violations, errors };
}

function nonceOf(policy: string | null): string {
  const nonce = /'nonce-([A-Za-z0-9+/_=-]+)'/.exec(policy ?? '')?.[1];
  if (!nonce) throw new Error(`no nonce in the page's policy: ${policy}`);
  return nonce;
}

/** The `nonce` attribute of each script tag in the served markup (null for a tag without one). */
function scriptNonces(html: string): (string | null)[] {
  return [...html.matchAll(/<script\b[^>]*>/g)].map((tag) => /\snonce="([^"]*)"/.exec(tag[0])?.[1] ?? null);
}

describe('the pages’ Content-Security-Policy', () => {
  it('each response has a nonce of its own, and every script tag of the page carries it', async () => {
    const seen = new Set<string>();
    for (const path of ['/login', '/login', '/no-such-page']) {
      const response = await fetch(`${server.origin}${path}`, {
        // A request cannot choose the nonce: what it sends under the policy's names is replaced.
        headers: {
          'content-security-policy': "script-src 'nonce-chosenbytheclient' 'unsafe-inline'",
          'content-security-policy-report-only': "script-src 'nonce-chosenbytheclient'",
        },
      });
      expect(response.status).toBe(path === '/no-such-page' ? 404 : 200);
      const policy = response.headers.get('content-security-policy') ?? '';
      const directives = new Map(
        policy.split(';').map((part) => {
          const [name = '', ...sources] = part.trim().split(/\s+/);
          return [name, sources.join(' ')] as const;
        }),
      );
      const nonce = nonceOf(policy);
      expect(nonce).not.toBe('chosenbytheclient');
      // 128 bits, base64.
      expect(Buffer.from(nonce, 'base64')).toHaveLength(16);
      expect(seen.has(nonce)).toBe(false);
      seen.add(nonce);
      expect(directives.get('script-src')).toBe(`'self' 'nonce-${nonce}' 'strict-dynamic'`);
      expect(directives.get('object-src')).toBe("'none'");
      expect(directives.get('base-uri')).toBe("'none'");
      expect(directives.get('frame-ancestors')).toBe("'none'");
      expect(directives.get('form-action')).toBe("'self'");
      expect(directives.get('connect-src')).toBe("'self'");
      expect(directives.get('default-src')).toBe("'self'");
      expect(policy).not.toMatch(/unsafe-eval/);

      const nonces = scriptNonces(await response.text());
      expect(nonces.length).toBeGreaterThan(1);
      expect(nonces.every((value) => value === nonce)).toBe(true);
    }
  });

  it('signed-in pages and the sign-in page run with no policy violation', async () => {
    const context = await browser.newContext();
    context.setDefaultTimeout(15_000);
    const { violations, errors } = await watchPolicy(context);
    const login = await context.newPage();
    const response = await login.goto(`${server.origin}/login`);
    const nonce = nonceOf(response!.headers()['content-security-policy'] ?? null);
    // The parser-inserted scripts ran with the response's nonce (Chromium hides it from the attribute).
    const documentNonces = await login.evaluate(() =>
      [...document.querySelectorAll('script')]
        .filter((script) => !script.src || script.nonce)
        .map((script) => script.nonce),
    );
    expect(documentNonces.length).toBeGreaterThan(0);
    expect(new Set(documentNonces)).toEqual(new Set([nonce]));
    await login.close();

    const page = await signIn(context, server.origin, server.adminEmail, server.adminPassword);
    for (const [path, heading] of [
      ['/reservations', 'Reservations'],
      ['/nodes', 'Nodes'],
      ['/capacity', 'Capacity and pools'],
      ['/events', 'Events'],
    ] as const) {
      await page.goto(`${server.origin}${path}`);
      await page.getByRole('heading', { level: 1, name: heading }).waitFor();
      // The live stream (fetch of /api/compute/watch) is open: connect-src let it through.
      await page.locator('[data-live="open"]').waitFor();
    }
    // Client-side navigation loads the next page's chunks through 'strict-dynamic'.
    await page.getByRole('link', { name: 'Nodes', exact: true }).click();
    await page.waitForURL(`${server.origin}/nodes`);
    await page.getByRole('heading', { level: 1, name: 'Nodes' }).waitFor();
    await page.locator('tr[data-node]').first().waitFor();
    await page.screenshot({ path: join(screenshotsDir, 'csp-nodes.png'), fullPage: true });
    expect(violations).toEqual([]);
    expect(errors).toEqual([]);
    await context.close();
  });

  it('an event handler injected into a page without the nonce does not run', async () => {
    const context = await browser.newContext();
    const { violations } = await watchPolicy(context);
    const page = await context.newPage();
    await page.goto(`${server.origin}/login`);
    // What an injected attribute would do: a broken image whose error handler runs a script.
    await page.evaluate(() => {
      const image = document.createElement('img');
      image.setAttribute('onerror', 'window.__injected = true');
      image.src = 'data:,not-an-image';
      document.body.append(image);
    });
    await expect.poll(() => violations.map((violation) => violation.directive)).toContain('script-src-attr');
    expect(
      await page.evaluate(() => (window as unknown as { __injected?: boolean }).__injected),
    ).toBeUndefined();
    await context.close();
  });

  it("WebSockets to the console's own origin pass connect-src 'self'; another origin's are refused", async () => {
    const context = await browser.newContext();
    const { violations } = await watchPolicy(context);
    const page = await context.newPage();
    // The sockets Chromium sent a handshake for.
    const sent: string[] = [];
    page.on('websocket', (socket) => sent.push(socket.url()));
    await page.goto(`${server.origin}/login`);
    // Resolves with how the socket ended up: open, or closed (a socket the policy refuses closes
    // without a close event in Chromium, so its state is watched).
    const attempt = (url: string) =>
      page.evaluate(
        (target) =>
          new Promise<string>((resolve) => {
            const socket = new WebSocket(target);
            const watch = setInterval(() => {
              if (socket.readyState === WebSocket.OPEN || socket.readyState === WebSocket.CLOSED) {
                clearInterval(watch);
                resolve(socket.readyState === WebSocket.OPEN ? 'open' : 'closed');
              }
            }, 20);
          }),
        url,
      );
    // The tunnel route the terminals open: the server refuses the made-up ticket, the policy lets
    // the attempt through.
    const sameOrigin = `${server.origin.replace(/^http/, 'ws')}/api/compute/tunnels/not-a-ticket`;
    expect(await attempt(sameOrigin)).toBe('closed');
    expect(violations).toEqual([]);
    const foreign = `${elsewhereOrigin.replace(/^http/, 'ws')}/socket`;
    expect(await attempt(foreign)).toBe('closed');
    await expect.poll(() => violations.length).toBeGreaterThan(0);
    expect(violations).toEqual([{ directive: 'connect-src', blocked: foreign }]);
    expect(sent).toEqual([sameOrigin]);
    await context.close();
  });

  it('a page on another origin cannot frame the console, signed in or not', async () => {
    const context = await browser.newContext();
    context.setDefaultTimeout(15_000);
    await signIn(context, server.origin, server.adminEmail, server.adminPassword).then((page) =>
      page.close(),
    );
    for (const [path, console_element] of [
      ['/login', 'input[type="password"]'],
      // The clickjacking target: a signed-in page of destructive buttons (the session cookie is
      // same-site, so the frame's request would carry it).
      ['/reservations', 'button'],
    ] as const) {
      const page = await context.newPage();
      const messages: string[] = [];
      page.on('console', (message) => messages.push(message.text()));
      await page.goto(`${elsewhereOrigin}/?path=${encodeURIComponent(path)}`);
      // The frame's load event fires for the error page that replaces a refused document too.
      await page.waitForFunction(() => document.title === 'loaded');
      const frame = page.frames().find((candidate) => candidate !== page.mainFrame());
      expect(frame).toBeDefined();
      expect(frame!.url().startsWith(server.origin)).toBe(false);
      expect(await frame!.locator(console_element).count()).toBe(0);
      // Refused by the policy's frame-ancestors (Chromium prefers it to X-Frame-Options when both
      // are sent), so the test fails without the policy even though X-Frame-Options alone would
      // still refuse.
      expect(messages.join('\n')).toMatch(/frame-ancestors 'none'/);
      await page.close();
    }
    await context.close();
  });
});
