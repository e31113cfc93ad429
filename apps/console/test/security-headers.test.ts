/**
 * The console's page policy and Next.js's telemetry, without a browser (issue 39, item 4): the
 * policy's nonce is new for every response and the build's policy allows no inline or evaluated
 * script; and Next.js's own telemetry, constructed as each of its commands does, is off whichever
 * way Next.js is run (build, development, production server) and in every process that loads the
 * console's mount, with nothing set in the environment. The Chromium side is framing.browser.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const appDir = join(import.meta.dirname, '..');

interface MountModule {
  contentSecurityPolicy(options: { nonce: string; dev?: boolean }): string;
  pageHeaders(options: { nonce: string; dev?: boolean }): Record<string, string>;
  scriptNonce(): string;
}

// A variable specifier: lib/mount.mjs is plain JavaScript without declarations.
const mountPath = pathToFileURL(join(appDir, 'lib', 'mount.mjs')).href;
const mount = (await import(mountPath)) as MountModule;

function directives(policy: string): Map<string, string[]> {
  return new Map(
    policy.split(';').map((part) => {
      const [name = '', ...sources] = part.trim().split(/\s+/);
      return [name, sources] as const;
    }),
  );
}

describe('the pages’ policy', () => {
  it('has a new 128-bit nonce for every response', () => {
    const nonces = new Set(Array.from({ length: 100 }, () => mount.scriptNonce()));
    expect(nonces.size).toBe(100);
    for (const nonce of nonces) expect(Buffer.from(nonce, 'base64')).toHaveLength(16);
  });

  it('lets the build run only scripts with the nonce, and development mode evaluate too', () => {
    const nonce = mount.scriptNonce();
    const build = directives(mount.pageHeaders({ nonce })['content-security-policy']!);
    expect(build.get('script-src')).toEqual(["'self'", `'nonce-${nonce}'`, "'strict-dynamic'"]);
    const dev = directives(mount.contentSecurityPolicy({ nonce, dev: true }));
    expect(dev.get('script-src')).toEqual([
      "'self'",
      `'nonce-${nonce}'`,
      "'strict-dynamic'",
      "'unsafe-eval'",
    ]);
    for (const policy of [build, dev]) {
      expect(policy.get('object-src')).toEqual(["'none'"]);
      expect(policy.get('base-uri')).toEqual(["'none'"]);
      expect(policy.get('frame-ancestors')).toEqual(["'none'"]);
      expect(policy.get('form-action')).toEqual(["'self'"]);
      expect(policy.get('connect-src')).toEqual(["'self'"]);
    }
  });
});

describe("Next.js's telemetry", () => {
  // A home of its own: no earlier `next telemetry disable` of this machine's user counts.
  const home = mkdtempSync(join(tmpdir(), 'console-telemetry-'));
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  /**
   * Whether Next.js's Telemetry, made in a fresh process with an environment that says nothing of
   * telemetry, is disabled before and after `load` (a CommonJS snippet run in apps/console).
   */
  function telemetryDisabled(load: string): { before: boolean; after: boolean } {
    const probe = `
      const { Telemetry } = require('next/dist/telemetry/storage');
      const disabled = () => new Telemetry({ distDir: ${JSON.stringify(home)} }).isDisabled;
      (async () => {
        const before = disabled();
        ${load}
        process.stdout.write('\\n' + JSON.stringify({ before, after: disabled() }));
      })();`;
    const output = execFileSync(process.execPath, ['-e', probe], {
      cwd: appDir,
      env: { PATH: process.env.PATH ?? '', HOME: home },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    // The last line: an enabled Telemetry prints its first-use notice before it.
    return JSON.parse(output.trim().split('\n').at(-1)!) as { before: boolean; after: boolean };
  }

  // Each Next.js command loads next.config.mjs before it makes its Telemetry.
  it.each(['phase-production-build', 'phase-development-server', 'phase-production-server'])(
    'is off once Next.js has loaded the console’s configuration (%s)',
    (phase) => {
      const result = telemetryDisabled(
        `await require('next/dist/server/config').default(${JSON.stringify(phase)}, process.cwd(), { silent: true });`,
      );
      // On before: the probe sees telemetry that is not turned off.
      expect(result).toEqual({ before: false, after: true });
    },
  );

  it('is off in every process that mounts the console (server.mjs, better-compute dev)', () => {
    const result = telemetryDisabled(`await import(${JSON.stringify(mountPath)});`);
    expect(result).toEqual({ before: false, after: true });
  });
});
