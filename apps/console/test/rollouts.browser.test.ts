/**
 * The Rollouts page in a real Chromium against the real server.mjs on PostgreSQL, started with a
 * pinned release key (CONSOLE_RELEASE_PINS) and three simulated machines: a release signed by that
 * key is registered and its build uploaded through the public API, and a rollout of it in two waves
 * over the simulated pool appears live; its first node's update workflow is aborted through the API
 * and the page shows the gate pausing it; Resume, Pause and Abort each go through their dialog (a
 * dismissed dialog changes nothing), the page showing each new state live and the API agreeing;
 * abort cancels the updates the nodes never ran. A viewer of the root tenant reads the rollouts but
 * sees no button, and the API refuses the call too. A console without release pins has no Rollouts
 * in its navigation, and /rollouts is its 404.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { readReleaseKey, signManifest } from '@better-compute/core/release';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import {
  actionButtons,
  api,
  axeViolations,
  consoleContext,
  expectIdRef,
  freePort,
  launchBrowser,
  overflowsSideways,
  runServer,
  screenshotsDir,
  signIn,
  VIEWPORTS,
} from './browser-support.js';

interface RolloutNode {
  nodeId: string;
  state: string;
  workflowId: string | null;
  error: string | null;
}
interface Rollout {
  id: string;
  releaseId: string;
  state: string;
  reason: string | null;
  currentWave: number;
  waves: { state: string; nodes: RolloutNode[] }[];
}

const key = readReleaseKey(
  generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
  'the console test release key',
);
const build = Buffer.from(Array.from({ length: 6_000 }, (_, i) => (i * 17) % 251));
const manifest = {
  version: '0.9.1',
  artifacts: [
    { platform: 'linux-x64', size: build.length, sha256: createHash('sha256').update(build).digest('hex') },
  ],
  minimumVersion: '0.1.0',
  notes: 'console rollouts test',
  createdAt: '2026-01-01T00:00:00.000Z',
};
const viewer = { email: 'rollout-viewer@console.local', password: 'viewer-password-2026' };

interface Running {
  child: ChildProcess;
  database: TestDatabase;
  dataDir: string;
  origin: string;
  password: string;
  output: () => string;
}
const servers: Running[] = [];

async function startConsole(env: Record<string, string>, sim: number): Promise<Running> {
  const database = await createTestDatabase('postgres');
  const dataDir = mkdtempSync(join(tmpdir(), 'console-rollouts-'));
  const port = await freePort();
  const started = await runServer(
    ['--dev', '--built', '--port', String(port), ...(sim ? ['--sim', String(sim)] : [])],
    { BETTER_COMPUTE_DATABASE_URL: database.url!, CONSOLE_DATA_DIR: dataDir, ...env },
    sim ? /simulated VPS machine\(s\) in pool/ : /console: http/,
  );
  const password = /its password, shown this once: (\S+)/.exec(started.output())?.[1];
  if (!password) throw new Error(`no administrator password in the output:\n${started.output()}`);
  const running = {
    child: started.child,
    database,
    dataDir,
    origin: `http://127.0.0.1:${port}`,
    password,
    output: started.output,
  };
  servers.push(running);
  return running;
}

let server: Running;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let adminToken: string;
let poolId: string;

const compute = <T>(path: string, input: Record<string, unknown>, token = adminToken) =>
  api<T>(server.origin, `/api/compute/${path}`, token, input);

beforeAll(async () => {
  const [started, launched] = await Promise.all([
    startConsole({ CONSOLE_RELEASE_PINS: key.keyId }, 3),
    launchBrowser(),
  ]);
  server = started;
  browser = launched;
  poolId = /3 simulated machine\(s\) in pool (\S+)/.exec(server.output())?.[1] ?? '';
  if (!poolId) throw new Error(`no simulated pool in the output:\n${server.output()}`);
  adminToken = (
    await api<{ token: string }>(server.origin, '/api/iam/sessions/signIn', '', {
      tenantId: 'root',
      email: 'admin@console.local',
      password: server.password,
    })
  ).token;
  // A release signed by the pinned key, and its build, through the public API.
  await compute('releases/register', { manifest, signatures: [signManifest(manifest, key)] });
  await compute('releases/upload', {
    version: manifest.version,
    platform: 'linux-x64',
    offset: 0,
    data: build.toString('base64'),
  });
  const person = await api<{ id: string }>(server.origin, '/api/iam/principals/create', adminToken, {
    kind: 'person',
    email: viewer.email,
    password: viewer.password,
    displayName: 'Rollout viewer',
  });
  await api(server.origin, '/api/iam/bindings/create', adminToken, {
    role: 'viewer',
    principalId: person.id,
  });
  context = await browser.newContext();
  context.setDefaultTimeout(20_000);
  page = await signIn(context, server.origin, 'admin@console.local', server.password);
}, 240_000);

afterAll(async () => {
  await browser?.close();
  for (const running of servers) {
    const { child } = running;
    if (child.exitCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    await running.database.close();
    rmSync(running.dataDir, { recursive: true, force: true });
  }
});

const shot = (target: Page, name: string) =>
  target.screenshot({ path: join(screenshotsDir, `${name}.png`), fullPage: true });

async function openRollouts(target: Page): Promise<void> {
  await target.getByRole('link', { name: 'Rollouts' }).click();
  await target.waitForURL(`${server.origin}/rollouts`);
  await target.getByRole('heading', { name: 'Rollouts', level: 1 }).waitFor();
}

const getRollout = (rolloutId: string) => compute<Rollout>('rollouts/get', { rolloutId });

/** Confirms an action through its dialog, and waits for the page to say it was done. */
async function steer(target: Page, rollout: Rollout, label: 'Pause' | 'Resume' | 'Abort', question: string) {
  const row = target.locator(`tr[data-rollout="${rollout.id}"]`);
  await row.getByRole('button', { name: `${label} ${rollout.id}` }).click();
  const dialog = target.getByRole('dialog');
  await expect.poll(() => dialog.textContent()).toContain(question);
  await dialog.getByRole('button', { name: `${label} rollout` }).click();
  const past = { Pause: 'Paused', Resume: 'Resumed', Abort: 'Aborted' }[label];
  await target
    .getByRole('status')
    .filter({ hasText: `${past} ${rollout.id}` })
    .waitFor();
}

describe('the Rollouts page', () => {
  let rollout: Rollout;

  it('shows a rollout created through the API live, with its waves and nodes', async () => {
    await expect(page.getByRole('navigation').getByRole('link', { name: 'Rollouts' }).count()).resolves.toBe(
      1,
    );
    await openRollouts(page);
    await page.locator('[data-live="open"]').waitFor();
    rollout = await compute<Rollout>('rollouts/create', {
      version: manifest.version,
      poolId,
      waves: ['1', '100%'],
      failureBudget: 0,
    });
    const row = page.locator(`tr[data-rollout="${rollout.id}"]`);
    await row.waitFor();
    // The rollout, its release and its pool by name and short id, each full id a press away.
    const poolName = (await compute<{ name: string }>('pools/get', { poolId })).name;
    await expect(row.locator('td').first().textContent()).resolves.toContain(` to pool ${poolName}`);
    await expectIdRef(row, rollout.id);
    await expectIdRef(row, rollout.releaseId, `bcd ${manifest.version}`);
    await expectIdRef(row, poolId, poolName);
    await expect(row.locator('[data-state]').textContent()).resolves.toBe('running');
    await row.getByRole('button', { name: `Details of ${rollout.id}` }).click();
    const details = page.locator(`section[data-details="${rollout.id}"]`);
    const first = rollout.waves[0]!.nodes[0]!.nodeId;
    // The controller starts the first wave: its node is updating, with its workflow and a timer.
    await details.locator(`tr[data-node="${first}"] td[data-node-state="updating"]`).waitFor();
    await expect(details.locator('[data-wave="0"] [data-wave-state]').textContent()).resolves.toBe('running');
    await expect(details.locator('[data-wave="1"] td[data-node-state]').allTextContents()).resolves.toEqual([
      'pending',
      'pending',
    ]);
    // A wave's node by name and short id, its full id a press away.
    const firstName = (await compute<{ name: string }>('nodes/get', { nodeId: first })).name;
    await expectIdRef(details.locator(`tr[data-node="${first}"]`), first, firstName);
    const took = details.locator(`tr[data-node="${first}"] td[data-took]`);
    await expect.poll(() => took.textContent()).toMatch(/^\d+ (ms|s)$/);
    await expect(row.locator('[data-progress]').textContent()).resolves.toBe('wave 1 of 2');
    await expect(row.locator('[data-nodes]').textContent()).resolves.toBe(
      '0 of 3 node(s) updated, 1 updating',
    );
    // A running rollout offers Pause and Abort, not Resume.
    await expect(row.getByRole('button', { name: `Pause ${rollout.id}` }).count()).resolves.toBe(1);
    await expect(row.getByRole('button', { name: `Abort ${rollout.id}` }).count()).resolves.toBe(1);
    await expect(row.getByRole('button', { name: `Resume ${rollout.id}` }).count()).resolves.toBe(0);
    await shot(page, 'rollouts');
  });

  it('shows the gate pausing it live when its first node fails', async () => {
    const current = await getRollout(rollout.id);
    const node = current.waves[0]!.nodes[0]!;
    await compute('workflows/abort', { workflowId: node.workflowId });
    const row = page.locator(`tr[data-rollout="${rollout.id}"]`);
    await row.locator('[data-state="paused"]').waitFor();
    await expect(row.locator('[data-reason]').textContent()).resolves.toBe(
      'wave 0 failed its gate: 1 node(s) failed, the failure budget is 0',
    );
    const details = page.locator(`section[data-details="${rollout.id}"]`);
    await details.locator(`tr[data-node="${node.nodeId}"] td[data-node-state="failed"]`).waitFor();
    await expect(details.locator('[data-wave="0"] [data-wave-state]').textContent()).resolves.toBe('failed');
    await expect(row.getByRole('button', { name: `Resume ${rollout.id}` }).count()).resolves.toBe(1);
    await expect(row.getByRole('button', { name: `Pause ${rollout.id}` }).count()).resolves.toBe(0);
  });

  it('resumes, pauses and resumes again through the dialogs; a dismissed dialog changes nothing', async () => {
    const row = page.locator(`tr[data-rollout="${rollout.id}"]`);
    // Dismissed: still paused.
    await row.getByRole('button', { name: `Resume ${rollout.id}` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel', exact: true }).click();
    await expect(getRollout(rollout.id)).resolves.toMatchObject({ state: 'paused' });

    await steer(
      page,
      rollout,
      'Resume',
      `Resume the rollout ${rollout.id} of bcd ${manifest.version}? Wave 1 failed its gate and is accepted as it is`,
    );
    await row.locator('[data-state="running"]').waitFor();
    await expect(getRollout(rollout.id)).resolves.toMatchObject({ state: 'running', currentWave: 1 });
    // The next wave starts, live.
    const details = page.locator(`section[data-details="${rollout.id}"]`);
    await expect
      .poll(() => details.locator('[data-wave="1"] td[data-node-state]').allTextContents())
      .toEqual(['updating', 'updating']);
    await shot(page, 'rollouts-second-wave');

    await steer(
      page,
      rollout,
      'Pause',
      `Pause the rollout ${rollout.id} of bcd ${manifest.version}? No further wave starts`,
    );
    await row.locator('[data-state="paused"]').waitFor();
    await expect(getRollout(rollout.id)).resolves.toMatchObject({
      state: 'paused',
      reason: 'paused by an operator',
    });
    await steer(page, rollout, 'Resume', `Resume the rollout ${rollout.id}`);
    await row.locator('[data-state="running"]').waitFor();
  });

  it('aborts through the dialog: the updates the nodes never ran are cancelled', async () => {
    const row = page.locator(`tr[data-rollout="${rollout.id}"]`);
    await row.getByRole('button', { name: `Abort ${rollout.id}` }).click();
    await shot(page, 'rollouts-abort-confirmation');
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel', exact: true }).click();
    await expect(getRollout(rollout.id)).resolves.toMatchObject({ state: 'running' });
    await steer(
      page,
      rollout,
      'Abort',
      'updates not yet run on their node are cancelled. This cannot be undone.',
    );
    await row.locator('[data-state="aborted"]').waitFor();
    const details = page.locator(`section[data-details="${rollout.id}"]`);
    await expect
      .poll(() => details.locator('[data-wave="1"] td[data-node-state]').allTextContents())
      .toEqual(['cancelled', 'cancelled']);
    await expect(actionButtons(row).allTextContents()).resolves.toEqual(['Hide details']);
    const aborted = await getRollout(rollout.id);
    expect(aborted.state).toBe('aborted');
    for (const node of aborted.waves[1]!.nodes) {
      expect(node.state).toBe('cancelled');
      const workflow = await compute<{ state: string }>('workflows/get', { workflowId: node.workflowId });
      expect(workflow.state).toBe('aborted');
      const commands = await compute<{ items: { kind: string; state: string; workflowId: string | null }[] }>(
        'commands/list',
        { nodeId: node.nodeId },
      );
      const update = commands.items.find((c) => c.workflowId === node.workflowId);
      // The simulated machines run no daemon, so the update was still queued: cancelled at once.
      expect(update).toMatchObject({ kind: 'bcd.update', state: 'cancelled' });
    }
    await shot(page, 'rollouts-aborted');
    // The page with a rollout's details open: no serious or critical axe violation.
    await expect(axeViolations(page)).resolves.toEqual([]);
    // At a phone's width and a desktop's, with the same rollout's details open, nothing scrolls sideways.
    for (const width of ['narrow', 'wide'] as const) {
      const sized = await consoleContext(browser, width);
      try {
        const tab = await signIn(sized, server.origin, 'admin@console.local', server.password);
        await tab.goto(`${server.origin}/rollouts`);
        const row = tab.locator(`tr[data-rollout="${rollout.id}"]`);
        await row.getByRole('button', { name: `Details of ${rollout.id}` }).click();
        await tab.locator(`section[data-details="${rollout.id}"] td[data-node-state]`).first().waitFor();
        await shot(tab, `page-rollouts-${VIEWPORTS[width].width}`);
        expect(await overflowsSideways(tab), `/rollouts at ${VIEWPORTS[width].width} px`).toBe(false);
      } finally {
        await sized.close();
      }
    }
  });

  it('a viewer reads the rollouts but sees no button, and the API refuses the call too', async () => {
    const running = await compute<Rollout>('rollouts/create', {
      version: manifest.version,
      poolId,
      waves: ['100%'],
    });
    const viewerContext = await browser.newContext();
    viewerContext.setDefaultTimeout(20_000);
    const viewerPage = await signIn(viewerContext, server.origin, viewer.email, viewer.password);
    await openRollouts(viewerPage);
    const row = viewerPage.locator(`tr[data-rollout="${running.id}"]`);
    await row.waitFor();
    await row.locator('[data-no-steering]').waitFor();
    await expect(actionButtons(row).allTextContents()).resolves.toEqual(['Details']);
    const answer = await viewerPage.evaluate(async (rolloutId) => {
      const response = await fetch('/api/compute/rollouts/abort', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-better-compute': '1' },
        body: JSON.stringify({ rolloutId }),
      });
      return { status: response.status, body: (await response.json()) as { error?: { code: string } } };
    }, running.id);
    expect(answer.status).toBe(403);
    expect(answer.body.error?.code).toBe('ACCESS_DENIED');
    await expect(getRollout(running.id)).resolves.toMatchObject({ state: 'running' });
    await shot(viewerPage, 'rollouts-viewer');
    await viewerContext.close();
    await compute('rollouts/abort', { rolloutId: running.id });
  });

  it('a console without release pins has no Rollouts page', async () => {
    const plain = await startConsole({}, 0);
    const plainContext = await browser.newContext();
    plainContext.setDefaultTimeout(20_000);
    const plainPage = await signIn(plainContext, plain.origin, 'admin@console.local', plain.password);
    await plainPage.getByRole('link', { name: 'Tenants' }).waitFor();
    await expect(plainPage.getByRole('link', { name: 'Rollouts' }).count()).resolves.toBe(0);
    const response = await plainPage.goto(`${plain.origin}/rollouts`);
    expect(response?.status()).toBe(404);
    await plainContext.close();
  });
});
