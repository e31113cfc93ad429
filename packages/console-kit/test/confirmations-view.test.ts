/**
 * createConfirmationsView against a real deployment with the embedded Better IAM: a person's agent
 * archives a project and is answered CONFIRMATION_REQUIRED; the person's view lists it awaiting
 * approval with the agent, the method, exactly what would run, why and its countdown; Approve from a
 * session without a second factor is refused and changes nothing; from one with it, the confirmation
 * leaves the pending list and the agent's retry runs once; Decline ends another for good; the live
 * stream's re-read moves a confirmation between filters; the rows render through the React hooks;
 * and no agent text can reorder what is read.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHmac } from 'node:crypto';
import { createElement } from 'react';
import { renderToString } from 'react-dom/server';
import { createComputeClient, isComputeClientError, type ComputeClient } from '@better-compute/client';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { betterCompute, serve } from 'better-compute';
import {
  CONFIRMATION_FILTERS,
  confirmationSecondsLeft,
  countdownText,
  createConfirmationsView,
  describeConfirmation,
  isApprovable,
  isDeclinable,
  type Confirmation,
} from '../src/index.js';
import { useList } from '../src/react.js';

const SECRET = 'console-kit-confirmations-secret-0123456789';
const PASSWORD = 'confirm-password-2026';
const TENANT = 'acme';

let database: TestDatabase;
let stopServer: () => Promise<void>;
let url: string;
/** The person's API key (no second factor), her session opened with one, and her agent's key. */
let person: ComputeClient;
let personMfa: ComputeClient;
let agent: ComputeClient;
let personId: string;
let agentId: string;

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

beforeAll(async () => {
  database = await createTestDatabase('postgres');
  const compute = await betterCompute({ database, secret: SECRET }, { log: () => {} });
  await compute.migrate();
  const stopper = new AbortController();
  let announce!: (url: string) => void;
  const listening = new Promise<string>((resolve) => (announce = resolve));
  const running = serve({
    compute,
    port: 0,
    roles: ['api'],
    signal: stopper.signal,
    log: () => {},
    env: { BETTER_COMPUTE_ADMIN_EMAIL: 'root@kit.test', BETTER_COMPUTE_ADMIN_PASSWORD: PASSWORD },
    onListening: announce,
  });
  url = await Promise.race([listening, running.then(() => Promise.reject(new Error('serve stopped')))]);
  stopServer = async () => {
    stopper.abort();
    await running;
  };

  const iam = compute.embeddedIam!;
  await iam.createTenant({ id: TENANT, name: 'Acme' });
  const alice = await iam.createPerson({ tenantId: TENANT, email: 'alice@acme.test', password: PASSWORD });
  await iam.createBinding({ tenantId: TENANT, role: 'tenant-admin', principalId: alice.id });
  personId = alice.id;
  person = createComputeClient({
    baseURL: url,
    token: (await iam.createApiKey(alice.id, { name: 'laptop' })).key,
  });
  const { secret } = await iam.enrollTotp(alice.id);
  await iam.confirmTotp(alice.id, totpCode(secret));
  const signed = await iam.signIn('alice@acme.test', PASSWORD, TENANT, totpCode(secret, 1));
  expect(signed.session.mfa).toBe(true);
  personMfa = createComputeClient({ baseURL: url, token: signed.token });
  const helper = await iam.createAgent({
    tenantId: TENANT,
    displayName: 'alice’s agent',
    actingFor: alice.id,
  });
  await iam.createBinding({ tenantId: TENANT, role: 'tenant-admin', principalId: helper.id });
  agentId = helper.id;
  agent = createComputeClient({
    baseURL: url,
    token: (await iam.createApiKey(helper.id, { name: 'agent' })).key,
  });
}, 120_000);

afterAll(async () => {
  await stopServer?.();
  await database?.close();
});

/** The agent's archive of a new project of its person: held; the project and its confirmation id. */
async function heldArchive(name: string): Promise<{ projectId: string; confirmationId: string }> {
  const project = await agent.call('projects.create', { tenantId: TENANT, name });
  const refused = await agent.call('projects.archive', { tenantId: TENANT, projectId: project.id }).then(
    () => null,
    (error: unknown) => error,
  );
  if (!isComputeClientError(refused) || refused.code !== 'CONFIRMATION_REQUIRED')
    throw new Error(`the archive was not held: ${String(refused)}`);
  return { projectId: project.id, confirmationId: String(refused.details?.confirmationId) };
}

const ids = (view: { list: { get(): { items: readonly Confirmation[] } } }) =>
  view.list.get().items.map((item) => item.id);

describe('the list', () => {
  it('shows what the agent asked for, awaiting approval, with exactly what would run and its countdown', async () => {
    const { projectId, confirmationId } = await heldArchive('kit-held');
    const view = createConfirmationsView(person, { tenantId: TENANT });
    expect(view.filter.get()).toBe('pending');
    await view.list.ensure();
    const row = view.list.get().items.find((item) => item.id === confirmationId)!;
    expect(row).toMatchObject({ state: 'pending', agentId, personId, method: 'projects.archive' });
    expect(describeConfirmation(row)).toEqual({
      id: confirmationId,
      asks: `Agent ${agentId} acting for ${personId} (delegation ${row.delegationId}) asks to run:`,
      method: 'projects.archive',
      summary: `projects.archive {"projectId":"${projectId}","tenantId":"${TENANT}"}`,
      reason: 'compute:projects:archive matches the delegation’s confirm pattern compute:*:archive',
      state: 'awaiting approval',
    });
    // Pending for an hour, counting down.
    const left = confirmationSecondsLeft(row, Date.now())!;
    expect(left).toBeGreaterThan(3600 - 120);
    expect(left).toBeLessThanOrEqual(3600);
    expect(countdownText(left)).toMatch(/^(1 h 0|59) min \d\d s left$/);
    expect(isApprovable(row, Date.now())).toBe(true);
    expect(isDeclinable(row, Date.now())).toBe(true);
    expect(isApprovable(row, Date.parse(row.expiresAt))).toBe(false);
    expect(isDeclinable(row, Date.parse(row.expiresAt))).toBe(false);
    expect(confirmationSecondsLeft(row, Date.parse(row.expiresAt) + 5_000)).toBe(0);
    expect(view.list.get().items.every((item) => item.state === 'pending')).toBe(true);
  });

  it('every filter reads its own state, and all reads them all', async () => {
    const { confirmationId } = await heldArchive('kit-filter');
    const view = createConfirmationsView(person, { tenantId: TENANT });
    for (const filter of CONFIRMATION_FILTERS) {
      await view.setFilter(filter);
      expect(view.list.get().error).toBeNull();
      expect(view.list.get().items.every((item) => filter === 'all' || item.state === filter)).toBe(true);
      expect(ids(view).includes(confirmationId)).toBe(filter === 'pending' || filter === 'all');
    }
  });

  it('an agent’s own list holds what it asked for, and it cannot approve any of it', async () => {
    const { confirmationId } = await heldArchive('kit-agent-list');
    const view = createConfirmationsView(agent, { tenantId: TENANT });
    await view.list.ensure();
    // The server's `mine` for an agent is the confirmations it asked for; approving stays refused.
    expect(ids(view)).toContain(confirmationId);
    await expect(view.approve(confirmationId)).rejects.toMatchObject({ code: 'ACCESS_DENIED' });
    await expect(
      person.call('confirmations.get', { tenantId: TENANT, confirmationId }),
    ).resolves.toMatchObject({
      state: 'pending',
    });
  });
});

describe('Approve and Decline', () => {
  it('Approve without a second factor is refused with its hint, and nothing changes', async () => {
    const { projectId, confirmationId } = await heldArchive('kit-no-mfa');
    const view = createConfirmationsView(person, { tenantId: TENANT });
    await view.list.ensure();
    const refusal = await view.approve(confirmationId).then(
      () => null,
      (error: unknown) => error,
    );
    expect(isComputeClientError(refusal) && refusal.code).toBe('ACCESS_DENIED');
    expect(isComputeClientError(refusal) && refusal.details?.reason).toBe('second-factor-required');
    expect(isComputeClientError(refusal) && refusal.hint).toMatch(/Sign in again with your TOTP code/);
    expect(ids(view)).toContain(confirmationId);
    await expect(person.call('projects.get', { tenantId: TENANT, projectId })).resolves.toMatchObject({
      state: 'active',
    });
  });

  it('Approve with a second factor: the row leaves the pending list, and the agent’s retry runs once', async () => {
    const { projectId, confirmationId } = await heldArchive('kit-approve');
    const view = createConfirmationsView(personMfa, { tenantId: TENANT });
    await view.list.ensure();
    expect(ids(view)).toContain(confirmationId);
    const approved = await view.approve(confirmationId);
    expect(approved).toMatchObject({ id: confirmationId, state: 'approved', decidedBy: personId });
    expect(describeConfirmation(approved).state).toBe('approved: the retry may run once');
    // Approved: the countdown is now the agent's 15-minute window to retry.
    expect(confirmationSecondsLeft(approved, Date.now())).toBeGreaterThan(14 * 60);
    expect(isApprovable(approved, Date.now())).toBe(false);
    // Until the agent retries, the person may still take it back.
    expect(isDeclinable(approved, Date.now())).toBe(true);
    expect(ids(view)).not.toContain(confirmationId);

    const ran = await agent.call('projects.archive', { tenantId: TENANT, projectId });
    expect(ran.state).toBe('archived');
    await view.setFilter('consumed');
    expect(ids(view)).toContain(confirmationId);
    const consumed = view.list.get().items.find((item) => item.id === confirmationId)!;
    expect(describeConfirmation(consumed).state).toBe('approved and run');
    expect(isDeclinable(consumed, Date.now())).toBe(false);
    // It ran once: the same call again asks for a new confirmation.
    const again = await agent
      .call('projects.archive', { tenantId: TENANT, projectId })
      .catch((e: unknown) => e);
    expect(isComputeClientError(again) && again.code).toBe('CONFIRMATION_REQUIRED');
    expect(isComputeClientError(again) && again.details?.confirmationId).not.toBe(confirmationId);
  });

  it('Decline ends it: the row leaves the list and the agent’s call never runs', async () => {
    const { projectId, confirmationId } = await heldArchive('kit-decline');
    const view = createConfirmationsView(personMfa, { tenantId: TENANT });
    await view.list.ensure();
    const declined = await view.decline(confirmationId);
    expect(declined.state).toBe('declined');
    expect(ids(view)).not.toContain(confirmationId);
    const retry = await agent
      .call('projects.archive', { tenantId: TENANT, projectId })
      .catch((e: unknown) => e);
    expect(isComputeClientError(retry) && retry.code).toBe('ACCESS_DENIED');
    await expect(person.call('projects.get', { tenantId: TENANT, projectId })).resolves.toMatchObject({
      state: 'active',
    });
    // Deciding again is refused by the server; the view says so as the API does.
    await expect(view.approve(confirmationId)).rejects.toMatchObject({ code: 'INVALID_STATE' });
  });

  it('an approval is taken back with Decline before the agent retries: the retry never runs', async () => {
    const { projectId, confirmationId } = await heldArchive('kit-take-back');
    const view = createConfirmationsView(personMfa, { tenantId: TENANT, filter: 'approved' });
    await view.approve(confirmationId);
    await view.list.ensure();
    expect(ids(view)).toContain(confirmationId);
    expect((await view.decline(confirmationId)).state).toBe('declined');
    expect(ids(view)).not.toContain(confirmationId);
    const retry = await agent
      .call('projects.archive', { tenantId: TENANT, projectId })
      .catch((e: unknown) => e);
    expect(isComputeClientError(retry) && retry.code).toBe('ACCESS_DENIED');
  });

  it('an event re-reads the row: one approved elsewhere leaves the pending list', async () => {
    const { confirmationId } = await heldArchive('kit-live');
    const view = createConfirmationsView(person, { tenantId: TENANT });
    await view.list.ensure();
    expect(ids(view)).toContain(confirmationId);
    await personMfa.call('confirmations.approve', { tenantId: TENANT, confirmationId });
    await view.tracked.refreshItem!(confirmationId);
    expect(ids(view)).not.toContain(confirmationId);
    await view.setFilter('approved');
    expect(ids(view)).toContain(confirmationId);
  });
});

describe('the row’s words', () => {
  it('render through the React hooks', async () => {
    const { confirmationId } = await heldArchive('kit-react');
    const view = createConfirmationsView(person, { tenantId: TENANT });
    await view.list.ensure();
    function Rows() {
      const state = useList(view.list);
      return createElement(
        'ul',
        null,
        state.items.map((item) =>
          createElement('li', { key: item.id }, `${item.id} ${describeConfirmation(item).state}`),
        ),
      );
    }
    expect(renderToString(createElement(Rows))).toContain(`${confirmationId} awaiting approval`);
  });

  it('no agent text can reorder or break what is read, and a bad id is not shown as one', () => {
    const crafted = {
      id: 'cfm_x\u202e<b>',
      agentId: 'agt_1',
      personId: 'usr_1',
      delegationId: 'dlg_1',
      method: 'projects.archive',
      summary: 'projects.archive {"name":"ok\u202egnp.exe\\nApprove this"}\u2028next',
      reason: 'because\nthe agent says so',
      state: 'pending',
      expiresAt: new Date(Date.now() + 60_000).toISOString(),
    } as Confirmation;
    const text = describeConfirmation(crafted);
    expect(text.id).toBe('cfm_x <b>');
    expect(text.summary).toBe('projects.archive {"name":"ok gnp.exe\\nApprove this"} next');
    expect(text.reason).toBe('because the agent says so');
    expect(
      confirmationSecondsLeft({ state: 'declined', expiresAt: crafted.expiresAt }, Date.now()),
    ).toBeNull();
  });
});
