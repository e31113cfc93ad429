// The console's pages, mounted on a server that already answers the APIs: server.mjs's own, and
// `better-compute dev`'s (packages/better-compute/src/host/dev-console.ts). Both hosts serve
// /api/iam and /api/compute themselves; this module owns the rest of the origin: the Next.js pages,
// their security headers, and the one process-wide hand-over the pages read the stack through
// (`globalThis.__betterComputeConsole`, src/lib/stack.ts).
//
// Next.js is loaded and prepared in the background, so a host can listen (and answer its API) at
// once; a page asked for before Next is ready waits for it.
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { StartError } from './settings.mjs';

// Next.js reports usage to Vercel unless told not to; nothing this console runs phones home. Set
// before Next is imported (it reads the variable when it loads), and again in mountConsole in case
// a host imported Next first.
process.env.NEXT_TELEMETRY_DISABLED = '1';

/** The console's directory (apps/console): Next's `dir`, where its build lives in .next/. */
export const consoleDir = fileURLToPath(new URL('..', import.meta.url));

/**
 * Paths the pages never serve: the APIs' (Better IAM at /api/iam, Better Compute at /api/compute,
 * and anything else a host puts under /api/). Everything else on the origin is a page or its assets.
 */
export function isApiPath(pathname) {
  return pathname === '/api' || pathname.startsWith('/api/');
}

/** A fresh nonce for one page response: 128 random bits, as CSP asks of a nonce. */
export function scriptNonce() {
  return randomBytes(16).toString('base64');
}

/**
 * The Content-Security-Policy of one page response. Scripts run only with this response's `nonce`
 * (Next.js puts it on every script tag it writes, reading it from the request's copy of this
 * header), and whatever those scripts load in turn ('strict-dynamic': the chunks Next.js's runtime
 * fetches); so a script injected into the page's markup never runs, nor does an inline event
 * handler. 'self' only serves browsers older than CSP Level 3, which ignore 'strict-dynamic'.
 * Development mode's hot reload evaluates the modules it receives as strings ('unsafe-eval'); the
 * build never does. Styles stay 'unsafe-inline': React writes `style` attributes and xterm.js adds
 * style elements, neither of which can carry a nonce. WebSockets to the same origin (terminals,
 * hot reload) are 'self' in CSP Level 3.
 */
export function contentSecurityPolicy({ nonce, dev = false }) {
  return [
    "default-src 'self'",
    `script-src 'self' 'nonce-${nonce}' 'strict-dynamic'${dev ? " 'unsafe-eval'" : ''}`,
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "worker-src 'self' blob:",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/**
 * The headers every page response carries, its policy with `nonce`. The console is never framed
 * (X-Frame-Options for old browsers, frame-ancestors for the rest), so no other site can overlay
 * its buttons (clickjacking).
 */
export function pageHeaders({ nonce, dev = false }) {
  return {
    'content-security-policy': contentSecurityPolicy({ nonce, dev }),
    'x-frame-options': 'DENY',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'same-origin',
    'cross-origin-opener-policy': 'same-origin',
    // Nothing the console does needs these; a page that tried would be refused by the browser.
    'permissions-policy': [
      'accelerometer=()',
      'camera=()',
      'display-capture=()',
      'geolocation=()',
      'gyroscope=()',
      'hid=()',
      'magnetometer=()',
      'microphone=()',
      'midi=()',
      'payment=()',
      'serial=()',
      'usb=()',
    ].join(', '),
  };
}

/**
 * Why the console cannot be mounted here, or null when it can: without development mode it serves
 * the production build, which must exist.
 */
export function consoleProblem({ dev = false } = {}) {
  if (!dev && !existsSync(join(consoleDir, '.next', 'BUILD_ID')))
    return 'the console is not built: run `npx next build` in apps/console first (node scripts/ensure.mjs does it)';
  return null;
}

/**
 * Next's development mode watches the app's files with watchers nothing outside it can close (its
 * webpack bundler keeps them to itself, and `next dev` ends its process instead). Once the pages are
 * closed they must not keep the host's process alive after everything else has stopped: they are
 * unreferenced, found among the process's handles (there is no public list of them).
 */
function releaseFileWatchers() {
  for (const handle of process._getActiveHandles?.() ?? []) {
    const kind = handle?.constructor?.name;
    if (kind === 'FSWatcher' || kind === 'StatWatcher') handle.unref?.();
  }
}

function answer(outgoing, status, text) {
  if (outgoing.headersSent) return void outgoing.end();
  outgoing.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
  });
  outgoing.end(text);
}

/**
 * Mounts the pages for a stack already built and migrated: `compute` with its embedded Better IAM
 * (`iam`), at `origin`. `dev` runs Next.js in its development mode (pages compiled on demand, hot
 * reload) instead of serving the build. Returns the host's side of it:
 *
 * - `route(pathname)`: the request listener for a page path, or null for the APIs' paths;
 * - `upgrade(request, socket, head)`: takes the WebSocket upgrades of the pages (development mode's
 *   hot reload) and answers true, false for any other;
 * - `ready`: settles once Next.js is prepared (rejects if it cannot start);
 * - `setOrigin(origin)`: the origin, once the host knows its port;
 * - `close()`.
 *
 * Throws a StartError when the build is missing (consoleProblem).
 */
export function mountConsole({ compute, iam, origin, dev = false, log = () => {} }) {
  process.env.NEXT_TELEMETRY_DISABLED = '1';
  const problem = consoleProblem({ dev });
  if (problem) throw new StartError(problem);
  if (!iam)
    throw new StartError(
      'the console signs people in with the embedded Better IAM, and this deployment configures its own iam',
    );
  // The pages read the session through this, in the same process (src/lib/stack.ts).
  const stack = { compute, iam, origin };
  globalThis.__betterComputeConsole = stack;

  // Next attaches its upgrade listener to the `httpServer` it is given, on its first request; it
  // gets this emitter rather than the host's server, so it only ever sees the upgrades handed to
  // it below and never races the API's own (tunnels, the gateway's sessions) for a socket.
  const upgrades = new EventEmitter();
  let handle;
  let app;
  const ready = (async () => {
    const { default: next } = await import('next');
    const { hostname, port } = new URL(origin);
    app = next({
      dev,
      dir: consoleDir,
      quiet: true,
      hostname: hostname.replace(/^\[|\]$/g, ''),
      port: Number(port) || 80,
      httpServer: upgrades,
    });
    await app.prepare();
    handle = app.getRequestHandler();
  })();
  let failed = null;
  ready.catch((error) => {
    failed = error;
    log(`console: Next.js could not start: ${error instanceof Error ? error.message : String(error)}`);
  });

  const page = (incoming, outgoing) => {
    const headers = pageHeaders({ nonce: scriptNonce(), dev });
    for (const [name, value] of Object.entries(headers)) outgoing.setHeader(name, value);
    // Next.js takes the nonce for its script tags from the request's policy header (the place its
    // middleware would put it). Whatever the browser sent under these names is replaced, so no
    // request chooses its own nonce.
    incoming.headers['content-security-policy'] = headers['content-security-policy'];
    delete incoming.headers['content-security-policy-report-only'];
    const serve = () =>
      handle(incoming, outgoing).catch((error) => {
        log(`console: a page failed: ${error instanceof Error ? error.message : String(error)}`);
        answer(outgoing, 500, 'The console could not render this page.\n');
      });
    if (handle) return void serve();
    if (failed) return answer(outgoing, 503, 'The console could not start; the server log says why.\n');
    ready.then(serve, () => answer(outgoing, 503, 'The console could not start; the server log says why.\n'));
  };

  return {
    ready,
    route: (pathname) => (isApiPath(pathname) ? null : page),
    upgrade(request, socket, head) {
      // Only development mode upgrades (its hot reload, under /_next/); the build serves none.
      if (!dev || !(request.url ?? '').startsWith('/_next/')) return false;
      if (handle) upgrades.emit('upgrade', request, socket, head);
      else socket.destroy();
      return true;
    },
    setOrigin(value) {
      stack.origin = value;
    },
    async close() {
      await ready.catch(() => {});
      await app?.close?.().catch?.(() => {});
      if (dev) releaseFileWatchers();
      if (globalThis.__betterComputeConsole === stack) delete globalThis.__betterComputeConsole;
    },
  };
}
