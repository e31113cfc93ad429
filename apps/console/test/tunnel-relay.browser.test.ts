/**
 * A terminal in the console for a node whose session another replica holds: the console and a
 * `better-compute serve --roles gateway` replica share one PostgreSQL database and one PKI bundle;
 * a real `bcd` joins through the console and holds its session with the gateway replica (mutual
 * TLS, its node certificate). The browser opens the node's root console on the console's origin,
 * and the console relays it over the gateways' mutual-TLS link with its own gateway certificate
 * (CONSOLE_GATEWAY_CERT, CONSOLE_GATEWAY_KEY): what is typed runs in a real shell on this machine
 * and is read back from the page. A console started with a certificate its bundle did not sign, or
 * with the key of another, refuses to start and names the file.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestDatabase } from '@better-compute/db/testing';
import { sql } from 'kysely';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bcd,
  bcdJoin,
  daemonConnected,
  freePort,
  type Proc,
} from '../../../packages/daemon/test/daemon-support.js';
import { type Pki, replica, scratchPki, SECRET } from '../../../packages/daemon/test/replicas-support.js';
import {
  adminSessionToken,
  api,
  type ConsoleProcess,
  launchBrowser,
  panelStatus,
  screenText,
  runServer,
  screenshotsDir,
  signIn,
  startConsole,
} from './browser-support.js';

const scratch = mkdtempSync(join(tmpdir(), 'console-relay-'));
const stateDir = join(scratch, 'state');
let pki: Pki;
let server: ConsoleProcess & { database: TestDatabase };
let browser: Browser;
let gateway: Proc | undefined;
let gatewayUrl = '';
let daemon: Proc | undefined;
let nodeId = '';

beforeAll(async () => {
  pki = await scratchPki(scratch);
  const consoleCert = await pki.gateway('console');
  [server, browser] = await Promise.all([
    startConsole(1, {
      CONSOLE_SECRET: SECRET,
      CONSOLE_PKI: join(scratch, '.better-compute', 'pki.json'),
      CONSOLE_GATEWAY_CERT: consoleCert.certFile,
      CONSOLE_GATEWAY_KEY: consoleCert.keyFile,
    }),
    launchBrowser(),
  ]);
  // The gateway replica, on the console's database once the console has migrated it.
  const port = await freePort();
  const cert = await pki.gateway('gw1');
  gatewayUrl = `https://127.0.0.1:${port}`;
  gateway = await replica(scratch, server.database.url!, [
    '--roles',
    'gateway',
    '--port',
    String(port),
    '--tls-cert',
    cert.certFile,
    '--tls-key',
    cert.keyFile,
  ]);
  const token = await adminSessionToken(server);
  const call = <T>(method: string, input: Record<string, unknown>) =>
    api<T>(server.origin, `/api/compute/${method.replace('.', '/')}`, token, { tenantId: 'root', ...input });
  const site = await call<{ id: string }>('sites.create', { name: 'relayed' });
  const pool = await call<{ id: string }>('pools.create', { siteId: site.id, name: 'relayed', class: 'vps' });
  const joinToken = await call<{ token: string }>('joinTokens.create', {
    poolId: pool.id,
    preApproved: true,
  });
  const joined = await bcdJoin(server.origin, joinToken.token, scratch, stateDir);
  nodeId = JSON.parse(joined.out[0]!).nodeId;
  daemon = bcd(['run', '--state-dir', stateDir, '--url', gatewayUrl]);
  await daemonConnected(stateDir);
}, 300_000);

afterAll(async () => {
  daemon?.child.kill('SIGKILL');
  gateway?.child.kill('SIGKILL');
  await browser?.close();
  await server?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

describe('a terminal for a node another replica holds', () => {
  it('the node’s session is the gateway replica’s, not the console’s', async () => {
    const holder = await sql<{ url: string }>`
      select r.url from compute.node_sessions s join compute.gateway_replicas r on r.id = s.gateway_id
      where s.node_id = ${nodeId}`.execute(server.database.db);
    expect(holder.rows[0]?.url).toBe(gatewayUrl);
  });

  it('opens in the console over the mutual-TLS link and runs what is typed in a real shell', async () => {
    const context = await browser.newContext();
    context.setDefaultTimeout(20_000);
    const page = await signIn(context, server.origin, server.adminEmail, server.adminPassword);
    await page.goto(`${server.origin}/nodes/${nodeId}`);
    await page.getByRole('button', { name: 'Open the root console' }).click();
    await expect
      .poll(() => panelStatus(page).filter({ hasText: 'Connected' }).count(), { timeout: 30_000 })
      .toBe(1);
    await page.getByTestId('terminal').click();
    await page.keyboard.type('echo relayed-$((6*7))\n');
    await expect.poll(() => screenText(page), { timeout: 20_000 }).toContain('relayed-42');
    await page.screenshot({ path: join(screenshotsDir, 'relayed-node-console.png'), fullPage: true });
    await page.keyboard.type('exit 4\n');
    await expect
      .poll(() => panelStatus(page).innerText(), { timeout: 20_000 })
      .toContain('exited with status 4');
    await context.close();
  }, 180_000);
});

describe('the console’s gateway certificate', () => {
  it('refuses to start with a key that is not the certificate’s, or a certificate from another CA', async () => {
    const mine = await pki.gateway('mine');
    const other = await pki.gateway('other');
    const foreignDir = mkdtempSync(join(scratch, 'foreign-'));
    const foreign = await (await scratchPki(foreignDir)).gateway('foreign');
    const started = async (cert: string, key: string) => {
      const port = await freePort();
      const failed = await runServer(
        ['--dev', '--built', '--port', String(port)],
        {
          BETTER_COMPUTE_DATABASE_URL: server.database.url!,
          CONSOLE_DATA_DIR: mkdtempSync(join(scratch, 'data-')),
          CONSOLE_SECRET: SECRET,
          CONSOLE_PKI: join(scratch, '.better-compute', 'pki.json'),
          CONSOLE_GATEWAY_CERT: cert,
          CONSOLE_GATEWAY_KEY: key,
        },
        /console: http/,
      ).then(
        ({ child }) => {
          child.kill('SIGKILL');
          return 'started';
        },
        (error: Error) => error.message,
      );
      return failed;
    };
    expect(await started(mine.certFile, other.keyFile)).toContain(
      `console: ${other.keyFile} is not the key of ${mine.certFile}`,
    );
    expect(await started(foreign.certFile, foreign.keyFile)).toContain(
      `console: ${foreign.certFile} was not signed by a machine CA of the PKI bundle`,
    );
  }, 120_000);
});
