/**
 * The Bare-metal machines page in a real Chromium against the real server.mjs on PostgreSQL. A
 * site with a site agent (joined with a site token, heartbeating, so the metal module has a ready
 * agent to send its BMC commands to) and machines enrolled through the API. The agent holds no
 * daemon session, so its metal.bmc commands stay queued until the test answers them the way the
 * gateway records an agent's answer: the commands module's advanceCommand, on the console's
 * database (the workflows then go on in the console's own workers).
 *
 * The rows show names, the site's name and the states; a machine enrolled after the page opened
 * appears live; the site picker narrows the list. Manage starts (verifying), and the BMC's answer
 * makes the machine manageable, live. Retire, Provide, Abort and Power off ask in the browser's
 * confirmation first, naming what happens: dismissed, nothing changes (the API agrees); accepted,
 * the call is made. A second Power status while the first runs is the server's CONFLICT, shown in
 * the row. A viewer at 375 px sees every button disabled, saying why, and the API refuses too.
 */
import type { Kysely } from 'kysely';
import type { Browser, BrowserContext, Dialog, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  advanceCommand,
  recordNodeSession,
} from '../../../packages/better-compute/src/modules/commands/index.js';
import type { ComputeTables } from '../../../packages/better-compute/src/db/tables.js';
import type { TestDatabase } from '@better-compute/db/testing';
import {
  adminSessionToken,
  api,
  computeCodeOf,
  type ConsoleProcess,
  consoleContext,
  launchBrowser,
  overflowsSideways,
  personWithRole,
  screenshot,
  signIn,
  startConsole,
} from './browser-support.js';

interface Machine {
  id: string;
  name: string;
  provisionState: string;
  targetState: string | null;
  powerState: string;
  workflowId: string | null;
  lastError: string | null;
  allowed: string[];
}
interface Command {
  id: string;
  kind: string;
  payload: { machineId?: string; action?: string };
}

const viewer = { email: 'machines-viewer@console.local', password: 'viewer-password-2026' };
/** The row's verbs: the short id's toggle is a button too, and is not one of them. */
const VERB = /^(Manage|Inspect|Provide|Retire|Abort|Recover|Power on|Power off|Power status) /;

let server: ConsoleProcess & { database: TestDatabase };
let browser: Browser;
let context: BrowserContext;
let page: Page;
let adminToken: string;
let siteId: string;
let emptySiteId: string;
let agentNodeId: string;
let heartbeat: ReturnType<typeof setInterval> | undefined;
/** Managed, provided, aborted and powered. */
let first: Machine;
/** Retired. */
let second: Machine;

const compute = <T>(path: string, input: Record<string, unknown>, token = adminToken) =>
  api<T>(server.origin, `/api/compute/${path}`, token, input);
const machine = (machineId: string) => compute<Machine>('metal/get', { machineId });
const rowOf = (target: Page, machineId: string) => target.locator(`tr[data-machine="${machineId}"]`);
const stateOf = (row: Locator) => row.locator('td[data-state]').getAttribute('data-state');
const verbs = (row: Locator) => row.getByRole('button', { name: VERB }).allTextContents();
const queuedBmc = async () =>
  (
    await compute<{ items: Command[] }>('commands/list', {
      nodeId: agentNodeId,
      state: 'queued',
      limit: 50,
    })
  ).items.filter((command) => command.kind === 'metal.bmc');

/** The site agent's next metal.bmc command, once the machine's workflow has queued it. */
async function nextBmcCommand(machineId: string): Promise<Command> {
  await expect
    .poll(async () => (await queuedBmc()).filter((c) => c.payload.machineId === machineId).length, {
      timeout: 30_000,
    })
    .toBe(1);
  return (await queuedBmc()).find((c) => c.payload.machineId === machineId)!;
}

/** The agent's answer to a metal.bmc command, recorded as the gateway records it. */
async function answer(commandId: string, result: Record<string, unknown>): Promise<void> {
  const db = server.database.db as unknown as Kysely<ComputeTables>;
  await advanceCommand(db, agentNodeId, commandId, { state: 'sent', at: new Date() });
  await advanceCommand(db, agentNodeId, commandId, {
    state: 'succeeded',
    at: new Date(),
    exitCode: null,
    stdout: '',
    stderr: '',
    result,
    error: null,
  });
}

/** Waits until the machine's workflow has ended, so the next call is not refused as CONFLICT. */
async function settled(machineId: string): Promise<void> {
  await expect
    .poll(
      async () => {
        const { workflowId } = await machine(machineId);
        if (!workflowId) return 'none';
        return (await compute<{ state: string }>('workflows/get', { workflowId })).state;
      },
      { timeout: 30_000 },
    )
    .not.toBe('running');
}

/** Answers the next browser confirmation; resolves with what it asked. */
function answerConfirmation(target: Page, accept: boolean): Promise<string> {
  return new Promise((resolve) => {
    target.once('dialog', (dialog: Dialog) => {
      resolve(dialog.message());
      void (accept ? dialog.accept() : dialog.dismiss());
    });
  });
}

/** Presses a row's button whose action asks first, answers the question, and resolves with it. */
async function pressAndAnswer(row: Locator, name: string, accept: boolean): Promise<string> {
  const asked = answerConfirmation(page, accept);
  await row.getByRole('button', { name }).click();
  return asked;
}

beforeAll(async () => {
  [server, browser] = await Promise.all([startConsole(1), launchBrowser()]);
  adminToken = await adminSessionToken(server);
  siteId = (await compute<{ id: string }>('sites/create', { name: 'dc-metal' })).id;
  emptySiteId = (await compute<{ id: string }>('sites/create', { name: 'dc-empty' })).id;
  const pool = await compute<{ id: string }>('pools/create', { siteId, name: 'metal-agents', class: 'gpu' });
  const { token: joinToken } = await compute<{ token: string }>('siteTokens/create', {
    poolId: pool.id,
    preApproved: true,
  });
  const joined = await compute<{ nodeId: string; nodeCredential: string }>('nodes/join', {
    joinToken,
    hostname: 'metal-agent-1',
    inventory: { cpuCores: 2, memoryGiB: 4, gpus: [] },
  });
  agentNodeId = joined.nodeId;
  const beat = () =>
    api(server.origin, '/api/compute/nodes/heartbeat', '', { nodeCredential: joined.nodeCredential });
  await beat();
  // The fleet controller takes a node offline after 60 s without a heartbeat, and the metal module
  // sends BMC commands only to a ready agent: beat as bcd would, for the whole suite.
  heartbeat = setInterval(() => void beat().catch(() => {}), 15_000);
  // Its session says it runs the site's provisioning network, as bcd run --pxe-dir's hello does:
  // provide boots the deploy ramdisk from it.
  await recordNodeSession(server.database.db as Kysely<ComputeTables>, {
    nodeId: agentNodeId,
    tenantId: 'root',
    gatewayId: 'gw_console_suite',
    at: new Date(),
    hello: { version: '0.1.0', capabilities: ['site.agent', 'site.pxe'] },
  });
  expect((await compute<{ state: string }>('nodes/get', { nodeId: agentNodeId })).state).toBe('ready');
  const enroll = (name: string, productUuid: string) =>
    compute<Machine>('metal/enroll', {
      siteId,
      name,
      bmcDriver: 'ipmi',
      bmcAddress: '10.0.0.7',
      bmcUser: 'admin',
      bmcPassword: 'bmc-pass',
      productUuid,
    });
  first = await enroll('r12-u07', '4c4c4544-0042-3510-8052-b4c04f4a4e31');
  second = await enroll('r12-u08', '4c4c4544-0042-3510-8052-b4c04f4a4e32');
  context = await consoleContext(browser, 'wide');
  page = await signIn(context, server.origin, server.adminEmail, server.adminPassword);
}, 240_000);

afterAll(async () => {
  clearInterval(heartbeat);
  await browser?.close();
  await server?.stop();
});

describe('the Bare-metal machines page', () => {
  it('is in the navigation; the rows show names, site and states; a new machine appears live', async () => {
    await page
      .getByRole('navigation')
      .getByRole('link', { name: 'Bare-metal machines', exact: true })
      .click();
    await page.waitForURL(`${server.origin}/machines`);
    await page.getByRole('heading', { level: 1, name: 'Bare-metal machines' }).waitFor();
    await page.locator('[data-live="open"]').waitFor();
    const row = rowOf(page, first.id);
    await row.waitFor();
    await expect(row.locator('[data-machine-name]').textContent()).resolves.toBe('r12-u07');
    await expect(rowOf(page, second.id).locator('[data-machine-name]').textContent()).resolves.toBe(
      'r12-u08',
    );
    await expect(row.locator(`[data-id="${siteId}"]`).textContent()).resolves.toContain('dc-metal');
    await expect.poll(() => stateOf(row)).toBe('enroll');
    await expect(row.locator('td[data-power]').textContent()).resolves.toBe('unknown');
    await expect(row.locator('td[data-inventory]').textContent()).resolves.toBe('not inspected');
    await expect(row.locator('td[data-last-error]').textContent()).resolves.toBe('—');
    // What `allowed` offers in enroll, and nothing more.
    await expect.poll(() => verbs(row)).toEqual(['Manage', 'Retire']);
    await expect.poll(() => row.getByRole('button', { name: 'Manage r12-u07' }).isEnabled()).toBe(true);

    // Enrolled after the page opened: its metal.enrolled event brings it in.
    const third = await compute<Machine>('metal/enroll', {
      siteId,
      name: 'r12-u09',
      bmcDriver: 'ipmi',
      bmcAddress: '10.0.0.9',
      bmcUser: 'admin',
      bmcPassword: 'bmc-pass',
      productUuid: '4c4c4544-0042-3510-8052-b4c04f4a4e33',
    });
    await rowOf(page, third.id).waitFor();

    // The site picker narrows the list to a site's machines.
    const picker = page.getByRole('form', { name: 'Choose a site' }).getByLabel('Site');
    await picker.selectOption(emptySiteId);
    await page.getByText('No machines at this site.').waitFor();
    await picker.selectOption(siteId);
    await row.waitFor();
    await expect(page.locator('tr[data-machine]').count()).resolves.toBe(3);
    await expect(overflowsSideways(page)).resolves.toBe(false);
    await screenshot(page, 'machines-1440');
  }, 120_000);

  it('Manage starts verifying; the BMC’s answer makes the machine manageable, live', async () => {
    const row = rowOf(page, first.id);
    await row.getByRole('button', { name: 'Manage r12-u07' }).click();
    await expect.poll(() => stateOf(row)).toBe('verifying');
    await expect(row.locator('td[data-state]').getAttribute('data-target')).resolves.toBe('manageable');
    await expect(row.locator('td[data-state]').textContent()).resolves.toContain('verifying → manageable');
    await expect(machine(first.id)).resolves.toMatchObject({
      provisionState: 'verifying',
      targetState: 'manageable',
    });
    // Verifying only asks the BMC a question: nothing to press until it answers.
    await expect.poll(() => verbs(row)).toEqual([]);
    const command = await nextBmcCommand(first.id);
    expect(command.payload.action).toBe('status');
    await answer(command.id, { powerState: 'off' });
    await expect.poll(() => stateOf(row), { timeout: 30_000 }).toBe('manageable');
    await expect.poll(() => row.locator('td[data-power]').textContent()).toBe('off');
    await expect
      .poll(() => verbs(row))
      .toEqual(['Inspect', 'Provide', 'Retire', 'Power on', 'Power off', 'Power status']);
    await settled(first.id);
  }, 120_000);

  it('Retire asks first: dismissed, nothing changes; accepted, the machine is retired', async () => {
    const row = rowOf(page, second.id);
    const question = `Retire r12-u08 (${second.id})? It is never provided again.`;
    await expect(pressAndAnswer(row, 'Retire r12-u08', false)).resolves.toBe(question);
    await expect(machine(second.id)).resolves.toMatchObject({ provisionState: 'enroll' });
    await expect.poll(() => stateOf(row)).toBe('enroll');

    await expect(pressAndAnswer(row, 'Retire r12-u08', true)).resolves.toBe(question);
    await expect.poll(() => stateOf(row)).toBe('retired');
    await expect(machine(second.id)).resolves.toMatchObject({ provisionState: 'retired' });
  }, 120_000);

  it('Provide and Abort ask first, naming what happens; only a yes calls', async () => {
    const row = rowOf(page, first.id);
    const provide = `Provide r12-u07 (${first.id})? The deploy ramdisk erases its disks’ partition tables and file-system signatures, and it becomes available to deploy.`;
    await expect(pressAndAnswer(row, 'Provide r12-u07', false)).resolves.toBe(provide);
    await expect(machine(first.id)).resolves.toMatchObject({
      provisionState: 'manageable',
      targetState: null,
    });
    await expect(queuedBmc()).resolves.toEqual([]);

    await expect(pressAndAnswer(row, 'Provide r12-u07', true)).resolves.toBe(provide);
    await expect.poll(() => stateOf(row)).toBe('cleaning');
    await expect(row.locator('td[data-state]').textContent()).resolves.toContain('cleaning → available');
    await expect(machine(first.id)).resolves.toMatchObject({
      provisionState: 'cleaning',
      targetState: 'available',
    });
    await expect.poll(() => verbs(row)).toEqual(['Abort']);

    const abort = `Abort the running cleaning of r12-u07 (${first.id})? It ends in clean failed.`;
    await expect(pressAndAnswer(row, 'Abort r12-u07', false)).resolves.toBe(abort);
    await expect(machine(first.id)).resolves.toMatchObject({ provisionState: 'cleaning' });

    await expect(pressAndAnswer(row, 'Abort r12-u07', true)).resolves.toBe(abort);
    await expect.poll(() => stateOf(row)).toBe('clean failed');
    await expect(machine(first.id)).resolves.toMatchObject({
      provisionState: 'clean failed',
      targetState: null,
    });
    // Its cleaning was waiting for the machine's MAC (enrolled by UUID only): nothing is left for the agent.
    await expect(queuedBmc()).resolves.toEqual([]);
    // The row shows the error the API answers, as the server wrote it.
    const { lastError } = await machine(first.id);
    expect(lastError).toBeTruthy();
    await expect(row.locator('td[data-last-error]').textContent()).resolves.toBe(lastError);
    await screenshot(page, 'machines-clean-failed');

    // Recover loses nothing, so it asks nothing.
    await row.getByRole('button', { name: 'Recover r12-u07' }).click();
    await expect.poll(() => stateOf(row)).toBe('manageable');
    await settled(first.id);
  }, 120_000);

  it('a second Power status while one runs is refused in place (CONFLICT); Power off asks first', async () => {
    const row = rowOf(page, first.id);
    await row.getByRole('button', { name: 'Power status r12-u07' }).click();
    const status = await nextBmcCommand(first.id);
    expect(status.payload.action).toBe('status');
    // The first call's workflow waits for the BMC: the server refuses a second, and the row says so.
    await row.getByRole('button', { name: 'Power status r12-u07' }).click();
    const refusal = row.getByRole('alert');
    await refusal.waitFor();
    await expect(refusal.textContent()).resolves.toContain('CONFLICT');
    await expect(refusal.textContent()).resolves.toContain(`machine ${first.id} has workflow`);
    await screenshot(page, 'machines-conflict');
    await answer(status.id, { powerState: 'on' });
    await expect.poll(() => row.locator('td[data-power]').textContent(), { timeout: 30_000 }).toBe('on');
    await settled(first.id);

    const question = `Power off r12-u07 (${first.id})? Whatever runs on it stops.`;
    await expect(pressAndAnswer(row, 'Power off r12-u07', false)).resolves.toBe(question);
    await expect(queuedBmc()).resolves.toEqual([]);
    await expect(machine(first.id)).resolves.toMatchObject({ powerState: 'on' });
    // The refusal shown stays until the next call replaces it.
    await expect(row.getByRole('alert').count()).resolves.toBe(1);

    await expect(pressAndAnswer(row, 'Power off r12-u07', true)).resolves.toBe(question);
    const off = await nextBmcCommand(first.id);
    expect(off.payload.action).toBe('off');
    await expect(row.getByRole('alert').count()).resolves.toBe(0);
    await answer(off.id, { powerState: 'off' });
    await expect.poll(() => row.locator('td[data-power]').textContent(), { timeout: 30_000 }).toBe('off');
    await settled(first.id);
  }, 120_000);

  it('ticked machines get one verb together: Manage starts on each; Retire asks first, naming how many; a refusal starts nothing', async () => {
    const enrolled = [];
    for (const [name, uuid] of [
      ['r12-u11', '4c4c4544-0042-3510-8052-b4c04f4a4e3b'],
      ['r12-u12', '4c4c4544-0042-3510-8052-b4c04f4a4e3c'],
    ] as const)
      enrolled.push(
        await compute<Machine>('metal/enroll', {
          siteId,
          name,
          bmcDriver: 'ipmi',
          bmcAddress: '10.0.0.8',
          bmcUser: 'admin',
          bmcPassword: 'bmc-pass',
          productUuid: uuid,
        }),
      );
    const bulk = page.getByRole('form', { name: 'Run a verb on the selected machines' });
    const submit = bulk.getByRole('button', { name: /^Run on \d+ selected$/ });
    const tick = async (name: string) => page.getByRole('checkbox', { name: `Select ${name}` }).check();
    // New machines appear live; each is ticked in its row.
    for (const { id, name } of enrolled) {
      await rowOf(page, id).waitFor();
      await tick(name);
    }
    await expect(submit.textContent()).resolves.toBe('Run on 2 selected');
    // Without a reason nothing can be sent.
    await expect(submit.isDisabled()).resolves.toBe(true);
    await bulk.getByLabel('Reason').fill('rack 12 bring-up');
    await bulk.getByLabel('Verb').selectOption('manage');
    await submit.click();
    await expect
      .poll(() => bulk.locator('[data-bulk="direct"]').textContent())
      .toBe('manage started on 2 machine(s).');
    for (const { id } of enrolled) {
      await expect.poll(() => stateOf(rowOf(page, id))).toBe('verifying');
      await answer((await nextBmcCommand(id)).id, { powerState: 'off' });
      await expect.poll(() => stateOf(rowOf(page, id)), { timeout: 30_000 }).toBe('manageable');
      await settled(id);
    }
    // The ticks were cleared; a verb one machine's state refuses starts on none, and says why.
    await expect(submit.textContent()).resolves.toBe('Run on 0 selected');
    await tick('r12-u11');
    await tick('r12-u12');
    await bulk.getByLabel('Verb').selectOption('recover');
    await submit.click();
    const refusal = bulk.getByRole('alert');
    await refusal.waitFor();
    await expect(refusal.textContent()).resolves.toContain('INVALID_STATE');
    await expect(refusal.textContent()).resolves.toContain('2 of 2 machines cannot recover');
    for (const { id } of enrolled)
      await expect(machine(id)).resolves.toMatchObject({ provisionState: 'manageable' });
    // Retire asks first; dismissed, nothing; accepted, both are retired.
    await bulk.getByLabel('Verb').selectOption('retire');
    const question = 'Retire 2 machines? They are never provided again.';
    const dismissed = answerConfirmation(page, false);
    await submit.click();
    await expect(dismissed).resolves.toBe(question);
    for (const { id } of enrolled)
      await expect(machine(id)).resolves.toMatchObject({ provisionState: 'manageable' });
    const accepted = answerConfirmation(page, true);
    await submit.click();
    await expect(accepted).resolves.toBe(question);
    for (const { id } of enrolled) {
      await expect.poll(() => stateOf(rowOf(page, id))).toBe('retired');
      await expect(machine(id)).resolves.toMatchObject({ provisionState: 'retired' });
    }
    await screenshot(page, 'machines-bulk');
  }, 120_000);

  it('a viewer at 375 px sees every button disabled, saying why; the API refuses too', async () => {
    const { token } = await personWithRole(
      server,
      adminToken,
      { ...viewer, displayName: 'Machines viewer' },
      'viewer',
    );
    const narrow = await consoleContext(browser, 'narrow');
    try {
      const viewerPage = await signIn(narrow, server.origin, viewer.email, viewer.password);
      await viewerPage.goto(`${server.origin}/machines`);
      const row = rowOf(viewerPage, first.id);
      await row.waitFor();
      // Reads are compute:metal:read, which a viewer holds: the machine and its state are there. The
      // row is live: polled until it shows what the earlier tests left (a power call may still land).
      await expect.poll(() => stateOf(row)).toBe('manageable');
      const buttons = row.getByRole('button', { name: VERB });
      await expect
        .poll(() => verbs(row))
        .toEqual(['Inspect', 'Provide', 'Retire', 'Power on', 'Power off', 'Power status']);
      for (const button of await buttons.all()) {
        await expect.poll(() => button.getAttribute('title')).toBe('Your roles do not allow this');
        await expect(button.isDisabled()).resolves.toBe(true);
      }
      // Ticked, with a reason, the bulk form's button stays disabled for a viewer, saying why.
      await viewerPage.getByRole('checkbox', { name: 'Select r12-u07' }).check();
      const bulk = viewerPage.getByRole('form', { name: 'Run a verb on the selected machines' });
      await bulk.getByLabel('Reason').fill('a viewer tries');
      const submit = bulk.getByRole('button', { name: 'Run on 1 selected' });
      await expect.poll(() => submit.getAttribute('title')).toBe('Your roles do not allow this');
      await expect(submit.isDisabled()).resolves.toBe(true);
      await expect(overflowsSideways(viewerPage)).resolves.toBe(false);
      await screenshot(viewerPage, 'machines-viewer-375');
      await expect(
        computeCodeOf(server.origin, 'metal/provide', { machineId: first.id }, token),
      ).resolves.toBe('ACCESS_DENIED');
      await expect(machine(first.id)).resolves.toMatchObject({ provisionState: 'manageable' });
    } finally {
      await narrow.close();
    }
  }, 120_000);
});
