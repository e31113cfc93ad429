/**
 * The Batches page in a real Chromium against the real server.mjs on PostgreSQL, with the
 * destructive-batch quorum on (the console's PKI bundle holds a two-of-two approver set) and batches
 * of power actions and a node deletion on its simulated machines: a pending batch with its countdown
 * and the approve command; Details with the scope by kind, its root, an approval and the members
 * awaiting approval; Cancel after a confirmation, which the API then reads as cancelled; an agent's
 * batch with the warning line; a viewer's Cancel disabled while the API refuses too; a reason
 * carrying markup shown as text.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPrivateKey } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { fromHex, generateApproverKey, signApproval } from '@better-compute/core/quorum';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { createPkiBundle } from 'better-compute';
import { api, freePort, launchBrowser, runServer, screenshotsDir, signIn } from './browser-support.js';

interface Batch {
  id: string;
  state: string;
  root: string;
  size: number;
  trustDomain: string;
  notAfter: string;
  createdByAgent: string | null;
  delegationId: string | null;
}

const TRUST_DOMAIN = 'console.localhost';
const SECRET = 'batches-browser-test-secret-0123456789abcdef';
const approvers = [generateApproverKey(), generateApproverKey()];
const viewer = { email: 'batch-viewer@console.local', password: 'viewer-password-2026' };

let database: TestDatabase;
let dataDir: string;
let child: ChildProcess;
let origin: string;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let adminToken: string;
let adminId: string;
let nodes: string[];

/** The console in dev mode with a PKI bundle of its own whose approver chain turns the quorum on. */
async function startConsoleWithQuorum(): Promise<string> {
  database = await createTestDatabase('postgres');
  dataDir = mkdtempSync(join(tmpdir(), 'console-batches-'));
  const pki = join(dataDir, 'pki.json');
  await createPkiBundle({ path: pki, secret: SECRET, trustDomain: TRUST_DOMAIN });
  const document = JSON.parse(readFileSync(pki, 'utf8')) as Record<string, unknown>;
  document.approvers = [
    {
      set: {
        trustDomain: TRUST_DOMAIN,
        epoch: 1,
        threshold: 2,
        approvers: approvers.map((key) => ({ kid: key.kid, publicKey: key.publicPem })),
      },
      signatures: [],
    },
  ];
  writeFileSync(pki, JSON.stringify(document), { mode: 0o600 });
  const port = await freePort();
  const started = await runServer(
    ['--dev', '--built', '--port', String(port), '--sim', '2'],
    {
      BETTER_COMPUTE_DATABASE_URL: database.url!,
      CONSOLE_DATA_DIR: dataDir,
      CONSOLE_SECRET: SECRET,
      CONSOLE_PKI: pki,
    },
    /simulated machine\(s\) in pool/,
  );
  child = started.child;
  const password = /its password, shown this once: (\S+)/.exec(started.output())?.[1];
  if (!password) throw new Error(`no administrator password in the output:\n${started.output()}`);
  origin = `http://127.0.0.1:${port}`;
  return password;
}

const compute = <T>(path: string, input: Record<string, unknown>, token = adminToken) =>
  api<T>(origin, `/api/compute/${path}`, token, input);

/** A batch of the root tenant: power actions on both machines and the deletion of the second. */
const createBatch = (reason: string, token = adminToken) =>
  compute<Batch>(
    'commandBatches/create',
    {
      reason,
      leaves: [
        { subject: nodes[0], kind: 'metal.power', payload: { action: 'off' } },
        { subject: nodes[1], kind: 'node.delete', payload: {} },
        { subject: nodes[1], kind: 'metal.power', payload: { action: 'cycle' } },
      ],
    },
    token,
  );

beforeAll(async () => {
  const [password, launched] = await Promise.all([startConsoleWithQuorum(), launchBrowser()]);
  browser = launched;
  const signedIn = await api<{ token: string }>(origin, '/api/iam/sessions/signIn', '', {
    tenantId: 'root',
    email: 'admin@console.local',
    password,
  });
  adminToken = signedIn.token;
  adminId = (await compute<{ principalId: string }>('system/whoami', {})).principalId;
  const listed = await compute<{ items: { id: string }[] }>('nodes/list', { limit: 50 });
  nodes = listed.items.map((node) => node.id).slice(0, 2);
  if (nodes.length < 2) throw new Error('the simulated machines did not join');
  const person = await api<{ id: string }>(origin, '/api/iam/principals/create', adminToken, {
    kind: 'person',
    email: viewer.email,
    password: viewer.password,
    displayName: 'Batch viewer',
  });
  await api(origin, '/api/iam/bindings/create', adminToken, { role: 'viewer', principalId: person.id });
  context = await browser.newContext();
  context.setDefaultTimeout(15_000);
  page = await signIn(context, origin, 'admin@console.local', password);
}, 240_000);

afterAll(async () => {
  await browser?.close();
  if (child && child.exitCode === null) {
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
  await database?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

const shot = (target: Page, name: string) =>
  target.screenshot({ path: join(screenshotsDir, `${name}.png`), fullPage: true });

async function openBatches(target: Page): Promise<void> {
  await target.getByRole('link', { name: 'Destructive batches' }).click();
  await target.waitForURL(`${origin}/batches`);
  await target.getByRole('heading', { name: 'Destructive batches' }).waitFor();
}

describe('the Batches page', () => {
  let batch: Batch;

  it('lists a pending batch with its countdown and the approve command, never a way to sign', async () => {
    batch = await createBatch('power-cycle rack 12 after the firmware recall');
    await openBatches(page);
    const row = page.locator(`tr[data-batch="${batch.id}"]`);
    await row.waitFor();
    await expect(row.locator('td[data-state]').textContent()).resolves.toBe('pending');
    await expect(row.textContent()).resolves.toContain('power-cycle rack 12 after the firmware recall');
    await expect(row.textContent()).resolves.toContain('Created by admin@console.local');
    await expect(row.textContent()).resolves.toContain('3 command(s): metal.power ×2, node.delete ×1');
    await expect(row.textContent()).resolves.toContain('0 of 2');
    const countdown = row.locator('[data-left]');
    await expect(countdown.textContent()).resolves.toMatch(/^2[34] h \d{1,2} min \d\d s left$/);
    const first = Number(await countdown.getAttribute('data-left'));
    await expect.poll(async () => Number(await countdown.getAttribute('data-left'))).toBeLessThan(first);
    await expect(row.locator('[data-approve-command]').textContent()).resolves.toBe(
      `better-compute batch approve --batch ${batch.id} --key <approver key>`,
    );
    await expect(page.getByRole('button', { name: /approve/i }).count()).resolves.toBe(0);
    await shot(page, 'batches');
  });

  it('Details shows the scope by kind with its root, the approvals so far and the members awaiting approval', async () => {
    // One of the two approvers signs, as batch approve would: the batch stays pending.
    const approval = signApproval(createPrivateKey(approvers[0]!.privatePem), {
      batchId: batch.id,
      trustDomain: batch.trustDomain,
      root: fromHex(batch.root, 32)!,
      size: batch.size,
      notAfter: Date.parse(batch.notAfter),
    });
    await compute('commandBatches/approve', { batchId: batch.id, ...approval });
    const row = page.locator(`tr[data-batch="${batch.id}"]`);
    await row.getByRole('button', { name: `Details of ${batch.id}` }).click();
    const panel = page.locator(`section[data-details="${batch.id}"]`);
    await panel.locator('[data-root]').waitFor();
    await expect(panel.locator('[data-root]').textContent()).resolves.toBe(batch.root);
    await expect(panel.textContent()).resolves.toContain(`over 3 entries (trust domain ${TRUST_DOMAIN}`);
    const power = panel.locator('details[data-kind="metal.power"]');
    await expect(power.locator('summary').textContent()).resolves.toBe(
      'metal.power ×2: power off, reset or cycle the machine',
    );
    await expect(power.locator('li').allTextContents()).resolves.toEqual([
      `${nodes[0]}: action off`,
      `${nodes[1]}: action cycle`,
    ]);
    const deletion = panel.locator('details[data-kind="node.delete"]');
    await expect(deletion.locator('summary').textContent()).resolves.toBe(
      'node.delete ×1: remove the node from the fleet',
    );
    await expect(deletion.locator('li').allTextContents()).resolves.toEqual([`${nodes[1]}: no payload`]);
    const approvals = panel.getByRole('table');
    await expect(approvals.locator('tbody tr').count()).resolves.toBe(1);
    await expect(approvals.locator('tbody tr td').first().textContent()).resolves.toBe(approvers[0]!.kid);
    await expect(approvals.locator('tbody tr').textContent()).resolves.toContain(adminId);
    await expect(panel.locator('details[data-member-state] summary').allTextContents()).resolves.toEqual([
      'awaiting approval (3)',
    ]);
    await shot(page, 'batches-details');
  });

  it('Cancel asks first, then cancels: none of its commands run, and the API says cancelled', async () => {
    const row = page.locator(`tr[data-batch="${batch.id}"]`);
    const cancel = row.getByRole('button', { name: `Cancel ${batch.id}` });
    await expect.poll(() => cancel.isEnabled()).toBe(true);
    await cancel.click();
    const dialog = page.getByRole('dialog');
    await expect(dialog.textContent()).resolves.toContain(
      `Cancel the batch ${batch.id}? None of its 3 command(s) will run`,
    );
    await shot(page, 'batches-cancel-confirmation');
    // Dismissing changes nothing.
    await dialog.getByRole('button', { name: 'Cancel', exact: true }).click();
    await expect(compute<Batch>('commandBatches/get', { batchId: batch.id })).resolves.toMatchObject({
      state: 'pending',
    });
    await cancel.click();
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel batch' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: `Cancelled ${batch.id}` })
      .waitFor();
    await row.waitFor({ state: 'detached' });
    await expect(compute<Batch>('commandBatches/get', { batchId: batch.id })).resolves.toMatchObject({
      state: 'cancelled',
    });
    const members = await compute<{ items: { state: string; awaitingApproval: boolean }[] }>(
      'commandBatches/members',
      { batchId: batch.id },
    );
    expect(members.items.map((member) => member.state)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    // The filter shows it among the cancelled ones, with no approve command and Cancel disabled.
    await page.getByLabel('Show').selectOption('cancelled');
    const cancelledRow = page.locator(`tr[data-batch="${batch.id}"]`);
    await cancelledRow.locator('td[data-state="cancelled"]').waitFor();
    await expect(cancelledRow.locator('[data-approve-command]').count()).resolves.toBe(0);
    await expect(cancelledRow.getByRole('button', { name: `Cancel ${batch.id}` }).isDisabled()).resolves.toBe(
      true,
    );
    await page.getByLabel('Show').selectOption('pending');
  });

  it('a batch an agent proposed shows the warning line instead of its creator', async () => {
    const agent = await api<{ id: string }>(origin, '/api/iam/principals/create', adminToken, {
      kind: 'agent',
      displayName: 'fleet helper',
      actingFor: adminId,
    });
    await api(origin, '/api/iam/bindings/create', adminToken, {
      role: 'tenant-admin',
      principalId: agent.id,
    });
    const key = await api<{ key: string }>(origin, '/api/iam/apiKeys/create', adminToken, {
      principalId: agent.id,
      name: 'agent-key',
    });
    const proposed = await createBatch('the agent says rack 12 must be power-cycled', key.key);
    expect(proposed.createdByAgent).toBe(agent.id);
    const row = page.locator(`tr[data-batch="${proposed.id}"]`);
    await row.waitFor();
    await expect(row.locator('[data-agent-warning]').textContent()).resolves.toBe(
      `Proposed by agent ${agent.id} for ${adminId} (delegation ${proposed.delegationId}): the reason is the agent's own text.`,
    );
    await expect(row.textContent()).resolves.not.toContain('Created by');
    await shot(page, 'batches-agent');
  });

  it('a reason carrying markup is shown as text, never run', async () => {
    const reason = '<img src=x onerror="window.__pwned=1"><b>bold</b>';
    const marked = await createBatch(reason);
    const row = page.locator(`tr[data-batch="${marked.id}"]`);
    await row.waitFor();
    await expect(row.textContent()).resolves.toContain(reason);
    await expect(row.locator('img, b').count()).resolves.toBe(0);
    await expect(page.evaluate(() => (window as { __pwned?: number }).__pwned)).resolves.toBeUndefined();
  });

  it('a viewer reads the batches but Cancel stays disabled, and the API refuses it too', async () => {
    const held = await createBatch('held for the viewer');
    const viewerContext = await browser.newContext();
    viewerContext.setDefaultTimeout(15_000);
    const viewerPage = await signIn(viewerContext, origin, viewer.email, viewer.password);
    await openBatches(viewerPage);
    const row = viewerPage.locator(`tr[data-batch="${held.id}"]`);
    await row.waitFor();
    const cancel = row.getByRole('button', { name: `Cancel ${held.id}` });
    await expect.poll(() => cancel.getAttribute('title')).toBe('Your roles do not allow this');
    await expect(cancel.isDisabled()).resolves.toBe(true);
    const answer = await viewerPage.evaluate(async (batchId) => {
      const response = await fetch('/api/compute/commandBatches/cancel', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-better-compute': '1' },
        body: JSON.stringify({ batchId }),
      });
      return { status: response.status, body: (await response.json()) as { error?: { code: string } } };
    }, held.id);
    expect(answer.status).toBe(403);
    expect(answer.body.error?.code).toBe('ACCESS_DENIED');
    await expect(compute<Batch>('commandBatches/get', { batchId: held.id })).resolves.toMatchObject({
      state: 'pending',
    });
    await viewerContext.close();
  });
});
