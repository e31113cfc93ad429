/**
 * A node's Workflows and Commands on its page, in a real Chromium against the real server.mjs on
 * PostgreSQL with two simulated machines (which hold no daemon session, so a command stays queued
 * until it is cancelled): a maintenance workflow started through the API after the page opened
 * appears live, running, with its queued command; Pause and Resume ask first (a dismissed dialog
 * changes nothing); Cancel of the command after its confirmation fails the workflow, which Retry
 * runs again and Abort ends, the page and the API agreeing at each step; a command sent to the node
 * appears live; the state filters read the lists again from the server. A viewer of the tenant
 * reads both lists, sees the same buttons disabled, and the API refuses the call too. The sections
 * have no form fields (their only inputs are filters), so the server error they show is a refusal
 * of an action, in the row it concerns. A tenant administrator of another tenant (acme) has none of
 * the root tenant's nodes in their list, and a root node's page shows the API's refusal with no
 * workflow, command or button of it. Both widths are screenshotted and must not scroll sideways.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adminSessionToken,
  api,
  type ConsoleProcess,
  launchBrowser,
  signIn,
  startConsole,
  tenantAdministrator,
  computeCodeOf,
  screenshot,
  overflowsSideways,
  consoleContext,
  personWithRole,
  actionButtons,
  expectIdRef,
} from './browser-support.js';

interface Workflow {
  id: string;
  state: string;
  steps: { name: string; state: string; commandId: string | null }[];
}
interface Command {
  id: string;
  state: string;
  kind: string;
  error: string | null;
}

const viewer = { email: 'node-viewer@console.local', password: 'viewer-password-2026' };

let server: ConsoleProcess;
let browser: Browser;
let adminContext: BrowserContext;
let viewerContext: BrowserContext;
let page: Page;
let adminToken: string;
let viewerToken: string;
let nodeId: string;
let nodeName: string;
let poolId: string;
let otherNodeId: string;
let workflow: Workflow;

const compute = <T>(path: string, input: Record<string, unknown>, token = adminToken) =>
  api<T>(server.origin, `/api/compute/${path}`, token, input);

/** The API's error code for a call, or 'OK'. */
const codeOf = (path: string, input: Record<string, unknown>, token: string) =>
  computeCodeOf(server.origin, path, input, token);

const shot = screenshot;

/** Whether the page scrolls sideways at its current width (it should not, at 375 px or 1,440 px). */
const overflows = overflowsSideways;

beforeAll(async () => {
  [server, browser] = await Promise.all([startConsole(2), launchBrowser()]);
  adminToken = await adminSessionToken(server);
  const nodes = (
    await compute<{ items: { id: string; name: string; poolId: string }[] }>('nodes/list', { limit: 10 })
  ).items;
  nodeId = nodes[0]!.id;
  nodeName = nodes[0]!.name;
  poolId = nodes[0]!.poolId;
  otherNodeId = nodes[1]!.id;
  viewerToken = (
    await personWithRole(server, adminToken, { ...viewer, displayName: 'Node viewer' }, 'viewer')
  ).token;
  adminContext = await consoleContext(browser, 'wide');
  viewerContext = await consoleContext(browser, 'narrow');
  page = await signIn(adminContext, server.origin, server.adminEmail, server.adminPassword);
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

const workflowState = async (workflowId: string) =>
  (await compute<Workflow>('workflows/get', { workflowId })).state;
const steeringButtons = (row: ReturnType<Page['locator']>) =>
  row.getByRole('button', { name: /^(Pause|Resume|Retry|Abort) wf_/ }).allTextContents();

describe("a node's workflows and commands", () => {
  let commandId: string;

  it('a maintenance workflow started after the page opened appears live, running, with its queued command', async () => {
    await page.goto(`${server.origin}/nodes/${nodeId}`);
    await page.getByRole('heading', { name: 'Workflows' }).waitFor();
    await page.getByText('No workflows on this node.').waitFor();
    await page.getByText('No commands on this node.').waitFor();
    await page.locator('[data-live="open"]').waitFor();
    // The node and its pool by name and short id, the full ids a press away.
    const poolName = (await compute<{ name: string }>('pools/get', { poolId })).name;
    await expectIdRef(page.locator('main'), nodeId, nodeName);
    await expectIdRef(page.locator('main'), poolId, poolName);
    workflow = await compute<Workflow>('workflows/create', {
      nodeId,
      script: 'disk-check',
      reason: 'console test maintenance',
    });
    const row = page.locator(`tr[data-workflow="${workflow.id}"]`);
    await row.waitFor();
    await expect(row.locator('strong').textContent()).resolves.toBe('node.maintenance');
    await expect(row.textContent()).resolves.toContain('console test maintenance');
    // The node drains (nothing on it), then the script's command is queued: every step is an event.
    await expect
      .poll(
        async () =>
          (await compute<Workflow>('workflows/get', { workflowId: workflow.id })).steps.find(
            (s) => s.commandId,
          )?.commandId ?? '',
        { timeout: 30_000 },
      )
      .toMatch(/^cmd_/);
    commandId = (await compute<Workflow>('workflows/get', { workflowId: workflow.id })).steps.find(
      (s) => s.commandId,
    )!.commandId!;
    const commandRow = page.locator(`tr[data-command="${commandId}"]`);
    await commandRow.waitFor();
    await expect(commandRow.locator('strong').textContent()).resolves.toBe('exec.script disk-check');
    await expect(commandRow.locator('td[data-state]').textContent()).resolves.toBe('queued');
    // The command's workflow by its kind and short id, the full id a press away.
    await expectIdRef(commandRow, workflow.id, 'node.maintenance');
    await expectIdRef(commandRow, commandId);
    await expectIdRef(row, workflow.id);
    await expect(row.locator('td[data-state]').textContent()).resolves.toBe('running');
    await expect(steeringButtons(row)).resolves.toEqual(['Pause', 'Abort']);
    await expect.poll(() => row.getByRole('button', { name: `Pause ${workflow.id}` }).isEnabled()).toBe(true);
    await expect
      .poll(() => commandRow.getByRole('button', { name: `Cancel ${commandId}` }).isEnabled())
      .toBe(true);
    await expect(overflows(page)).resolves.toBe(false);
    await shot(page, 'node-operations-1440');
  }, 120_000);

  it('Pause and Resume ask first; a dismissed dialog changes nothing, and the page and the API agree', async () => {
    const row = page.locator(`tr[data-workflow="${workflow.id}"]`);
    await row.getByRole('button', { name: `Pause ${workflow.id}` }).click();
    const dialog = page.getByRole('dialog');
    await expect(dialog.textContent()).resolves.toContain(
      `Pause the node.maintenance workflow ${workflow.id}?`,
    );
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await expect(workflowState(workflow.id)).resolves.toBe('running');

    await row.getByRole('button', { name: `Pause ${workflow.id}` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Pause workflow' }).click();
    await expect.poll(() => row.locator('td[data-state]').textContent()).toBe('paused');
    await expect(workflowState(workflow.id)).resolves.toBe('paused');
    await page
      .getByRole('status')
      .filter({ hasText: `Paused ${workflow.id}: it is paused.` })
      .waitFor();
    await expect(steeringButtons(row)).resolves.toEqual(['Resume', 'Abort']);

    await row.getByRole('button', { name: `Resume ${workflow.id}` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Resume workflow' }).click();
    await expect.poll(() => row.locator('td[data-state]').textContent()).toBe('running');
    await expect(workflowState(workflow.id)).resolves.toBe('running');
  }, 120_000);

  it('Cancel of the queued command asks first; the workflow then fails, Retry runs it again and Abort ends it', async () => {
    const commandRow = page.locator(`tr[data-command="${commandId}"]`);
    await commandRow.getByRole('button', { name: `Cancel ${commandId}` }).click();
    const dialog = page.getByRole('dialog');
    await expect(dialog.textContent()).resolves.toContain(
      `Cancel the command ${commandId} (exec.script disk-check)? It has not been delivered: it never runs.`,
    );
    await dialog.getByRole('button', { name: 'Cancel command' }).click();
    await expect.poll(() => commandRow.locator('td[data-state]').textContent()).toBe('cancelled');
    expect((await compute<Command>('commands/get', { commandId })).state).toBe('cancelled');
    await expect(actionButtons(commandRow).count()).resolves.toBe(0);

    // The workflow's command step fails on the cancelled command, seen live.
    const row = page.locator(`tr[data-workflow="${workflow.id}"]`);
    await expect.poll(() => row.locator('td[data-state]').textContent(), { timeout: 30_000 }).toBe('failed');
    await expect(workflowState(workflow.id)).resolves.toBe('failed');
    await expect(steeringButtons(row)).resolves.toEqual(['Retry', 'Abort']);

    await row.getByRole('button', { name: `Retry ${workflow.id}` }).click();
    await expect(page.getByRole('dialog').textContent()).resolves.toContain(
      `Retry the node.maintenance workflow ${workflow.id}?`,
    );
    await page.getByRole('dialog').getByRole('button', { name: 'Retry workflow' }).click();
    await expect.poll(() => row.locator('td[data-state]').textContent()).toBe('running');
    // The retried step queues a new command, which appears live.
    await expect.poll(() => page.locator('tr[data-command]').count(), { timeout: 30_000 }).toBe(2);

    await row.getByRole('button', { name: `Abort ${workflow.id}` }).click();
    await expect(page.getByRole('dialog').textContent()).resolves.toContain('This cannot be undone.');
    await page.getByRole('dialog').getByRole('button', { name: 'Abort workflow' }).click();
    await expect.poll(() => row.locator('td[data-state]').textContent()).toBe('aborted');
    await expect(workflowState(workflow.id)).resolves.toBe('aborted');
    await expect(steeringButtons(row)).resolves.toEqual([]);
    // Abort cancels the command it was waiting for.
    await expect
      .poll(() => page.locator('tr[data-command] td[data-state="cancelled"]').count(), { timeout: 30_000 })
      .toBe(2);
  }, 120_000);

  it('a command sent to the node appears live, and the state filters read the lists again from the server', async () => {
    const command = await compute<Command>('commands/run', { nodeId, kind: 'inventory.refresh' });
    const row = page.locator(`tr[data-command="${command.id}"]`);
    await row.waitFor();
    await expect(row.locator('strong').textContent()).resolves.toBe('inventory.refresh');
    await expect(row.locator('td[data-state]').textContent()).resolves.toBe('queued');

    const commands = page.getByRole('form', { name: 'Filter commands' });
    await commands.getByLabel('Show').selectOption('queued');
    await expect.poll(() => page.locator('tr[data-command]').count()).toBe(1);
    await commands.getByLabel('Show').selectOption('cancelled');
    await expect.poll(() => page.locator('tr[data-command]').count()).toBe(2);
    await commands.getByLabel('Show').selectOption('all');
    await expect.poll(() => page.locator('tr[data-command]').count()).toBe(3);
    const workflows = page.getByRole('form', { name: 'Filter workflows' });
    await workflows.getByLabel('Show').selectOption('running');
    await page.getByText('No running workflows on this node.').waitFor();
    await workflows.getByLabel('Show').selectOption('all');
    await page.locator(`tr[data-workflow="${workflow.id}"]`).waitFor();
  }, 120_000);

  it('a viewer reads both lists at 375 px with every button disabled, and the API refuses the call too', async () => {
    const running = await compute<Workflow>('workflows/create', {
      nodeId: otherNodeId,
      script: 'disk-check',
    });
    const viewerPage = await signIn(viewerContext, server.origin, viewer.email, viewer.password);
    await viewerPage.goto(`${server.origin}/nodes/${otherNodeId}`);
    const row = viewerPage.locator(`tr[data-workflow="${running.id}"]`);
    await row.waitFor();
    for (const name of [`Pause ${running.id}`, `Abort ${running.id}`]) {
      const button = row.getByRole('button', { name });
      // Disabled while IAM answers, and still disabled once it has: the title then says why.
      await expect.poll(() => button.getAttribute('title')).toBe('Your roles do not allow this');
      await expect(button.isDisabled()).resolves.toBe(true);
    }
    const cancel = viewerPage.locator('tr[data-command]').getByRole('button', { name: /^Cancel cmd_/ });
    await expect
      .poll(() => cancel.getAttribute('title'), { timeout: 30_000 })
      .toBe('Your roles do not allow this');
    await expect(cancel.isDisabled()).resolves.toBe(true);
    await expect(overflows(viewerPage)).resolves.toBe(false);
    await shot(viewerPage, 'node-operations-viewer-375');
    await expect(codeOf('workflows/abort', { workflowId: running.id }, viewerToken)).resolves.toBe(
      'ACCESS_DENIED',
    );
    await viewerPage.close();
  }, 120_000);

  it("the API's refusal of an action is shown in place, and the row then shows what the workflow is now", async () => {
    // A page whose event stream is cut (it polls every 20 s instead): the workflow is aborted behind
    // its back, so its row still offers Pause, and the API refuses it with INVALID_STATE.
    const running = (
      await compute<{ items: Workflow[] }>('workflows/list', { nodeId: otherNodeId, state: 'running' })
    ).items[0]!;
    const cut = await adminContext.newPage();
    await cut.route('**/api/compute/watch', (route) => route.abort());
    await cut.goto(`${server.origin}/nodes/${otherNodeId}`);
    const row = cut.locator(`tr[data-workflow="${running.id}"]`);
    const pause = row.getByRole('button', { name: `Pause ${running.id}` });
    await expect.poll(() => pause.isEnabled()).toBe(true);
    await compute('workflows/abort', { workflowId: running.id });
    await pause.click();
    await cut.getByRole('dialog').getByRole('button', { name: 'Pause workflow' }).click();
    await row.getByRole('alert').filter({ hasText: 'INVALID_STATE' }).waitFor();
    await expect.poll(() => row.locator('td[data-state]').textContent()).toBe('aborted');
    await cut.close();
  }, 120_000);

  it("a tenant administrator of another tenant sees none of the root tenant's nodes and can press nothing on one", async () => {
    const acmeAdmin = { email: 'admin@acme.test', password: 'acme-admin-password-2026' };
    const acmeToken = await tenantAdministrator(server, adminToken, { id: 'acme', name: 'Acme' }, acmeAdmin);
    const refusal = await codeOf('nodes/get', { nodeId: otherNodeId }, acmeToken);
    expect(refusal).not.toBe('OK');
    await expect(
      codeOf('workflows/create', { nodeId: otherNodeId, script: 'disk-check' }, acmeToken),
    ).resolves.not.toBe('OK');
    const context = await consoleContext(browser, 'narrow');
    const acmePage = await signIn(context, server.origin, acmeAdmin.email, acmeAdmin.password, 'acme');
    await acmePage.getByRole('link', { name: 'Nodes' }).click();
    await acmePage.waitForURL(`${server.origin}/nodes`);
    await acmePage.getByRole('heading', { level: 1, name: 'Nodes' }).waitFor();
    await acmePage.locator('[aria-busy="true"]').first().waitFor({ state: 'detached' });
    await expect(acmePage.locator(`tr[data-node="${otherNodeId}"]`).count()).resolves.toBe(0);
    await acmePage.goto(`${server.origin}/nodes/${otherNodeId}`);
    // The refusal is shown in an alert (an empty live region may be there before the answer is).
    await acmePage.getByRole('alert').filter({ hasText: refusal }).first().waitFor();
    await expect(acmePage.locator('tr[data-workflow], tr[data-command]').count()).resolves.toBe(0);
    await expect(acmePage.locator('main button').count()).resolves.toBe(0);
    await expect(overflows(acmePage)).resolves.toBe(false);
    await shot(acmePage, 'node-operations-tenant-admin-375');
    await context.close();
  }, 120_000);
});
