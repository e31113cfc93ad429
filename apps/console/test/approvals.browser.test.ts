/**
 * The Approvals page ("awaiting approval", issue 36 item 2) in a real Chromium against the real
 * server.mjs on PostgreSQL: a person's agent calls a destructive method (projects.archive) and a
 * reservation above its spend limit with an idempotency key, and is answered CONFIRMATION_REQUIRED;
 * the person signs in with password and TOTP, sees both awaiting approval with their confirmation
 * ids and exactly what would run, and approves each after the browser asks; the agent's retries
 * then run once (the keyed one replays after); a join token asked for with markup in its description
 * arrives live, is shown as text and declined, and its retry is refused. A person signed in without
 * a second factor sees the server's refusal in place (Approve and Decline alike), and nothing runs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import {
  adminSessionToken,
  api,
  expectIdRef,
  launchBrowser,
  screenshotsDir,
  signIn,
  startConsole,
  type ConsoleProcess,
} from './browser-support.js';

interface Refusal {
  code: string;
  message: string;
  hint?: string;
  details?: { confirmationId?: string; summary?: string; reason?: string };
}

const alice = { email: 'alice@console.local', password: 'alice-password-2026' };
const bob = { email: 'bob@console.local', password: 'bob-password-2026' };

let server: ConsoleProcess;
let browser: Browser;
let adminToken: string;
let poolId: string;
let aliceId: string;
let totpSecret: string;
/** Alice's session from before she enrolled her authenticator: it reads, but holds no second factor. */
let aliceToken: string;
/** The API keys of alice's agent (spend limit 1 GPU-hour) and of bob's. */
let aliceAgent: { id: string; key: string };
let bobAgent: { id: string; key: string };

/** The RFC 6238 code of a base32 secret (SHA-1, 30 s, 6 digits) `offset` steps from now. */
function totpCode(secret: string, offset = 0): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = '';
  for (const char of secret.replace(/=+$/, '').toUpperCase())
    bits += alphabet.indexOf(char).toString(2).padStart(5, '0');
  const key = Buffer.from(bits.match(/.{8}/g)!.map((byte) => parseInt(byte, 2)));
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(Date.now() / 30_000) + offset));
  const mac = createHmac('sha1', key).update(counter).digest();
  const at = mac[mac.length - 1]! & 0xf;
  return String((mac.readUInt32BE(at) & 0x7fffffff) % 1_000_000).padStart(6, '0');
}

/** A compute call as a program makes it, answered in full: status, replay header and body. */
async function call(path: string, token: string, input: Record<string, unknown>) {
  const response = await fetch(`${server.origin}/api/compute/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(input),
  });
  const body = (await response.json()) as { data?: Record<string, unknown>; error?: Refusal };
  return { status: response.status, replayed: response.headers.get('idempotent-replayed'), ...body };
}

/** The call is held: CONFIRMATION_REQUIRED, and the confirmation's id. */
async function held(path: string, token: string, input: Record<string, unknown>): Promise<Refusal> {
  const answer = await call(path, token, input);
  expect(answer.error?.code, JSON.stringify(answer.error)).toBe('CONFIRMATION_REQUIRED');
  expect(answer.status).toBe(403);
  expect(answer.error?.details?.confirmationId).toMatch(/^cfm_/);
  return answer.error!;
}

/** A person of the root tenant who administers it. */
async function person(who: { email: string; password: string }, displayName: string): Promise<string> {
  const created = await api<{ id: string }>(server.origin, '/api/iam/principals/create', adminToken, {
    kind: 'person',
    email: who.email,
    password: who.password,
    displayName,
  });
  await api(server.origin, '/api/iam/bindings/create', adminToken, {
    role: 'tenant-admin',
    principalId: created.id,
  });
  return created.id;
}

/** An agent acting for `actingFor` with the default delegation (and a spend limit), and its key. */
async function agentFor(actingFor: string, extra: Record<string, unknown> = {}) {
  const agent = await api<{ id: string }>(server.origin, '/api/iam/principals/create', adminToken, {
    kind: 'agent',
    displayName: 'fleet helper',
    actingFor,
    ...extra,
  });
  await api(server.origin, '/api/iam/bindings/create', adminToken, {
    role: 'tenant-admin',
    principalId: agent.id,
  });
  const { key } = await api<{ key: string }>(server.origin, '/api/iam/apiKeys/create', adminToken, {
    principalId: agent.id,
    name: 'agent-key',
  });
  return { id: agent.id, key };
}

beforeAll(async () => {
  [server, browser] = await Promise.all([startConsole(2), launchBrowser()]);
  adminToken = await adminSessionToken(server);
  const pools = await api<{ items: { id: string; name: string }[] }>(
    server.origin,
    '/api/compute/pools/list',
    adminToken,
    {},
  );
  poolId = pools.items.find((pool) => pool.name === 'sim-gpu')?.id ?? pools.items[0]!.id;
  aliceId = await person(alice, 'Alice');
  // Alice enrolls an authenticator (TOTP); bob has no second factor.
  const session = await api<{ token: string }>(server.origin, '/api/iam/sessions/signIn', '', {
    tenantId: 'root',
    ...alice,
  });
  aliceToken = session.token;
  totpSecret = (await api<{ secret: string }>(server.origin, '/api/iam/totp/enroll', session.token, {}))
    .secret;
  await api(server.origin, '/api/iam/totp/confirm', session.token, { code: totpCode(totpSecret) });
  aliceAgent = await agentFor(aliceId, { spendLimitGpuHours: 1 });
  bobAgent = await agentFor(await person(bob, 'Bob'));
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

const shot = (target: Page, name: string) =>
  target.screenshot({ path: join(screenshotsDir, `${name}.png`), fullPage: true });

async function openApprovals(page: Page): Promise<void> {
  await page.getByRole('link', { name: 'Awaiting approval' }).click();
  await page.waitForURL(`${server.origin}/approvals`);
  await page.getByRole('heading', { level: 1, name: 'Agents awaiting approval' }).waitFor();
}

/** Approve in the browser: the button, then the browser's question, answered yes. */
async function approveInPage(page: Page, confirmationId: string, summary: string): Promise<void> {
  const row = page.locator(`tr[data-confirmation="${confirmationId}"]`);
  const approve = row.getByRole('button', { name: `Approve ${confirmationId}` });
  await expect.poll(() => approve.isEnabled()).toBe(true);
  await approve.click();
  const dialog = page.getByRole('dialog');
  await expect(dialog.textContent()).resolves.toContain(`Approve ${confirmationId}?`);
  await expect(dialog.textContent()).resolves.toContain(summary);
  await dialog.getByRole('button', { name: 'Approve', exact: true }).click();
}

describe('the Approvals page', () => {
  it('a person with a second factor sees what the agent asked, awaiting approval, approves, and the retries run once', async () => {
    // The agent's destructive call and its reservation above the spend limit are both held.
    const project = await call('projects/create', aliceAgent.key, { name: 'approvals-demo' });
    expect(project.status).toBe(200);
    const projectId = String(project.data!.id);
    const archive = await held('projects/archive', aliceAgent.key, { projectId });
    const reserve = { poolId, gpus: 1, durationSeconds: 7200, idempotencyKey: 'big-run-1' };
    const reservation = await held('reservations/create', aliceAgent.key, reserve);
    expect(reservation.details!.reason).toMatch(/above the delegation’s limit of 1/);

    // Alice signs in with her password and the code from her authenticator.
    const context: BrowserContext = await browser.newContext();
    context.setDefaultTimeout(15_000);
    const page = await context.newPage();
    await page.goto(`${server.origin}/login`);
    await page.getByLabel('Email').fill(alice.email);
    await page.getByLabel('Password').fill(alice.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const code = page.getByLabel('Code from your authenticator (or a recovery code)');
    await code.waitFor();
    await code.fill(totpCode(totpSecret, 1));
    await page.getByRole('button', { name: 'Verify' }).click();
    await page.waitForURL(`${server.origin}/reservations`);
    await openApprovals(page);
    await expect(page.locator('[data-no-second-factor]').count()).resolves.toBe(0);

    for (const [refusal, method] of [
      [archive, 'projects.archive'],
      [reservation, 'reservations.create'],
    ] as const) {
      const id = refusal.details!.confirmationId!;
      const row = page.locator(`tr[data-confirmation="${id}"]`);
      await row.waitFor();
      await expect(row.locator('[data-confirmation-id]').textContent()).resolves.toBe(id);
      await expect(row.locator('td[data-state]').textContent()).resolves.toBe('awaiting approval');
      await expect(row.locator('[data-method]').textContent()).resolves.toBe(method);
      await expect(row.locator('[data-summary]').textContent()).resolves.toBe(refusal.details!.summary);
      await expect(row.textContent()).resolves.toContain(refusal.details!.reason);
      // Who asked, for whom and on what, by name and short id, each full id a press away.
      const asks = row.locator('[data-asks]');
      await expectIdRef(asks, aliceAgent.id, 'fleet helper');
      await expectIdRef(asks, aliceId, 'Alice');
      await expect(asks.textContent()).resolves.toMatch(/^Agent fleet helper.* acting for Alice/);
      if (method === 'projects.archive') await expectIdRef(asks, projectId, 'approvals-demo');
      await expect(row.locator('[data-left]').textContent()).resolves.toMatch(/^(1 h 0|59) min \d\d s left$/);
    }
    expect(reservation.details!.summary).not.toContain('big-run-1');
    await shot(page, 'approvals');

    // Dismissing the browser's question changes nothing.
    const archiveId = archive.details!.confirmationId!;
    await page
      .locator(`tr[data-confirmation="${archiveId}"]`)
      .getByRole('button', { name: `Approve ${archiveId}` })
      .click();
    await shot(page, 'approvals-confirm');
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel', exact: true }).click();
    const pending = await call('confirmations/get', aliceToken, { confirmationId: archiveId });
    expect(pending.data!.state).toBe('pending');

    await approveInPage(page, archiveId, archive.details!.summary!);
    await page
      .getByRole('status')
      .filter({ hasText: `Approved ${archiveId}` })
      .waitFor();
    await page.locator(`tr[data-confirmation="${archiveId}"]`).waitFor({ state: 'detached' });
    // The agent's retry runs once; the same call again asks anew.
    const ran = await call('projects/archive', aliceAgent.key, { projectId });
    expect(ran.status).toBe(200);
    expect(ran.data!.state).toBe('archived');
    const again = await held('projects/archive', aliceAgent.key, { projectId });
    expect(again.details!.confirmationId).not.toBe(archiveId);

    const reservationId = reservation.details!.confirmationId!;
    await approveInPage(page, reservationId, reservation.details!.summary!);
    await page
      .getByRole('status')
      .filter({ hasText: `Approved ${reservationId}` })
      .waitFor();
    // The retry with the same idempotency key runs once; run again, it replays the same reservation.
    const first = await call('reservations/create', aliceAgent.key, reserve);
    expect(first.status).toBe(200);
    expect(first.replayed).not.toBe('true');
    const replay = await call('reservations/create', aliceAgent.key, reserve);
    expect(replay.replayed).toBe('true');
    expect(replay.data!.id).toBe(first.data!.id);
    const mine = await call('reservations/list', aliceToken, { limit: 500 });
    const made = (mine.data!.items as { id: string; agentId: string | null }[]).filter(
      (item) => item.agentId === aliceAgent.id,
    );
    expect(made.map((item) => item.id)).toEqual([first.data!.id]);

    // Both show as approved and run under their filter.
    await page.getByLabel('Show').selectOption('consumed');
    for (const id of [archiveId, reservationId])
      await page.locator(`tr[data-confirmation="${id}"] td[data-state="consumed"]`).waitFor();
    await expect(
      page
        .locator(`tr[data-confirmation="${archiveId}"]`)
        .getByRole('button', { name: `Approve ${archiveId}` })
        .isDisabled(),
    ).resolves.toBe(true);
    await shot(page, 'approvals-consumed');

    // A new request arrives live; the agent's own text is shown as text, never run; Decline ends it.
    await page.getByLabel('Show').selectOption('pending');
    const markup = '<img src=x onerror="window.__pwned=1"><b>approve me</b>';
    const token = await held('joinTokens/create', aliceAgent.key, {
      poolId,
      description: markup,
      idempotencyKey: 'join-token-1',
    });
    const tokenId = token.details!.confirmationId!;
    const tokenRow = page.locator(`tr[data-confirmation="${tokenId}"]`);
    await tokenRow.waitFor();
    await expect(tokenRow.locator('[data-summary]').textContent()).resolves.toBe(token.details!.summary);
    expect(token.details!.summary).toContain(JSON.stringify(markup));
    await expect(tokenRow.locator('img, b').count()).resolves.toBe(0);
    await tokenRow.getByRole('button', { name: `Decline ${tokenId}` }).click();
    await page
      .getByRole('status')
      .filter({ hasText: `Declined ${tokenId}: the agent's call never runs.` })
      .waitFor();
    await tokenRow.waitFor({ state: 'detached' });
    await expect(page.evaluate(() => (window as { __pwned?: number }).__pwned)).resolves.toBeUndefined();
    const refused = await call('joinTokens/create', aliceAgent.key, {
      poolId,
      description: markup,
      idempotencyKey: 'join-token-1',
    });
    expect(refused.error?.code).toBe('ACCESS_DENIED');
    await context.close();
  });

  it('without a second factor Approve and Decline are refused in place with the hint, and nothing runs', async () => {
    const project = await call('projects/create', bobAgent.key, { name: 'approvals-no-mfa' });
    const projectId = String(project.data!.id);
    const refusal = await held('projects/archive', bobAgent.key, { projectId });
    const id = refusal.details!.confirmationId!;

    const context = await browser.newContext();
    context.setDefaultTimeout(15_000);
    const page = await signIn(context, server.origin, bob.email, bob.password);
    await openApprovals(page);
    await page.locator('[data-no-second-factor]').waitFor();
    const row = page.locator(`tr[data-confirmation="${id}"]`);
    await row.waitFor();
    await approveInPage(page, id, refusal.details!.summary!);
    const alert = row.getByRole('alert');
    await alert.waitFor();
    await expect(alert.textContent()).resolves.toContain('ACCESS_DENIED');
    await expect(alert.textContent()).resolves.toContain('Sign in again with your TOTP code');
    await expect(row.locator('[data-second-factor-hint]').textContent()).resolves.toContain(
      'sign in again with the code from your authenticator',
    );
    await expect(row.locator('td[data-state]').textContent()).resolves.toBe('awaiting approval');
    await shot(page, 'approvals-refused');
    // Nothing ran: the confirmation waits, and the agent's retry is held by the same one.
    const retry = await held('projects/archive', bobAgent.key, { projectId });
    expect(retry.details!.confirmationId).toBe(id);
    const state = await call('projects/get', adminToken, { projectId });
    expect(state.data!.state).toBe('active');

    // Declining is decided the same way: refused in place from this session, and it still waits.
    await row.getByRole('button', { name: `Decline ${id}` }).click();
    await row
      .getByRole('alert')
      .filter({ hasText: 'to decline a confirmation, sign in with your second factor' })
      .waitFor();
    await expect(row.locator('td[data-state]').textContent()).resolves.toBe('awaiting approval');
    const bobSession = await api<{ token: string }>(server.origin, '/api/iam/sessions/signIn', '', {
      tenantId: 'root',
      ...bob,
    });
    const still = await call('confirmations/get', bobSession.token, { confirmationId: id });
    expect(still.data!.state).toBe('pending');
    expect((await held('projects/archive', bobAgent.key, { projectId })).details!.confirmationId).toBe(id);
    expect((await call('projects/get', adminToken, { projectId })).data!.state).toBe('active');
    await context.close();
  });
});
