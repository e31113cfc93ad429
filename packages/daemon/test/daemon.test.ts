/**
 * A real `bcd` against a real `better-compute serve` on PostgreSQL: join with approval, the
 * session's Hello, an inventory change reported as it happens, commands delivered in order and
 * run exactly once across a killed daemon and a killed server, a cancelled command, and the
 * credential kept out of argv, output and logs.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatedCommandSigner } from '../../better-compute/src/gateway/signer.js';
import {
  bcd,
  type Deployment,
  deployment,
  freePort,
  type Proc,
  start,
  startServer,
  until,
} from './daemon-support.js';

const scratch = mkdtempSync(join(tmpdir(), 'bcd-test-'));
const stateDir = join(scratch, 'state');
const scriptsDir = join(scratch, 'scripts');
const marks = join(scratch, 'marks');
const gpuFile = join(scratch, 'gpus.json');
const keyFile = join(scratch, 'command-root.pem');
let env: Deployment;
let server: Proc | undefined;
let daemon: Proc | undefined;
let port: number;
let nodeId: string;
let nodeCredential: string;

const gpu = (index: number) => ({ index, model: 'L4', product: 'L4-24GB', vramGiB: 24, nvlinkDomain: null });
const runDaemon = () =>
  bcd([
    'run',
    '--state-dir',
    stateDir,
    '--gpu-inventory',
    gpuFile,
    '--scripts-dir',
    scriptsDir,
    '--inventory-interval',
    '1',
  ]);
const runs = (name: string) =>
  (() => {
    try {
      return readFileSync(marks, 'utf8')
        .split('\n')
        .filter((line) => line === name).length;
    } catch {
      return 0;
    }
  })();
const command = (id: string) => env.call<any>('commands.get', { commandId: id });
/** Waits until `script` has started on the node more than `before` times (its own mark, not a state seen between polls). */
const startedOnNode = (id: string, script: string, before: number) =>
  until(
    `${script} to start on the node`,
    async () => {
      if (runs(script) > before) return true;
      throw new Error(`${id} is ${(await command(id)).state}, ${script} ran ${runs(script)} times`);
    },
    60_000,
  );
const settled = (id: string, state = 'succeeded') =>
  until(`${id} to be ${state}`, async () => {
    const c = await command(id);
    return c.state === state ? c : undefined;
  });

beforeAll(async () => {
  env = await deployment();
  port = await freePort();
  writeFileSync(keyFile, generatedCommandSigner().privateKeyPem, { mode: 0o600 });
  writeFileSync(gpuFile, JSON.stringify({ gpus: [gpu(0)] }));
  // Maintenance scripts the operator installed on this node; each marks that it ran.
  const { mkdirSync } = await import('node:fs');
  mkdirSync(scriptsDir);
  writeFileSync(join(scriptsDir, 'mark.sh'), `echo mark >> ${marks}\necho marked\n`);
  writeFileSync(join(scriptsDir, 'slow.sh'), `echo slow >> ${marks}\nsleep 3\necho slept\n`);
  writeFileSync(join(scriptsDir, 'sleep.sh'), `echo sleep >> ${marks}\nsleep 60\n`);
  writeFileSync(join(scriptsDir, 'fail.sh'), `echo broken >&2\nexit 3\n`);
  // Fails the first time it runs, succeeds after.
  writeFileSync(
    join(scriptsDir, 'flaky.sh'),
    `echo flaky >> ${marks}\n[ "$(grep -c '^flaky$' ${marks})" -ge 2 ] || { echo 'not yet' >&2; exit 1; }\n`,
  );
  server = await startServer(env.database.url!, port, keyFile);
}, 120_000);

afterAll(async () => {
  daemon?.child.kill('SIGKILL');
  server?.child.kill('SIGKILL');
  await env?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('bcd against a real server', () => {
  it('joins with a token from a file, waits for approval, and keeps its credential 0600 and out of its output', async () => {
    const site = await env.call('sites.create', { name: 'lab' });
    const pool = await env.call('pools.create', { siteId: site.id, name: 'lab-gpus' });
    const token = await env.call('joinTokens.create', { poolId: pool.id });
    const tokenFile = join(scratch, 'join-token');
    writeFileSync(tokenFile, `${token.token}\n`, { mode: 0o600 });
    const joining = bcd([
      'join',
      '--url',
      `http://127.0.0.1:${port}`,
      '--token-file',
      tokenFile,
      '--state-dir',
      stateDir,
      '--gpu-inventory',
      gpuFile,
    ]);
    await until('the progress line', async () =>
      joining.err.some((line) => line.includes('waiting for an operator')),
    );
    const [request] = (await env.call('joinRequests.list', { state: 'pending' })).items;
    expect(request.inventory.gpus).toHaveLength(1);
    await env.call('joinRequests.approve', { joinRequestId: request.id });
    expect(await joining.exited).toBe(0);
    const identity = JSON.parse(readFileSync(join(stateDir, 'node.json'), 'utf8'));
    nodeId = identity.nodeId;
    nodeCredential = identity.nodeCredential;
    expect(nodeCredential).toMatch(/^node_/);
    expect(statSync(join(stateDir, 'node.json')).mode & 0o777).toBe(0o600);
    expect(statSync(stateDir).mode & 0o777).toBe(0o700);
    const printed = [...joining.out, ...joining.err].join('\n');
    expect(printed).not.toContain(nodeCredential.split('.')[1]);
    expect(printed).not.toContain(token.token);
    expect(JSON.parse(joining.out[0]!)).toEqual({ nodeId, stateDir });
  });

  it('bcd join --wait ends non-zero with the operator’s reason when its request is rejected; its progress goes to stderr only, one line per state', async () => {
    const site = await env.call('sites.create', { name: 'rejecting' });
    const pool = await env.call('pools.create', { siteId: site.id, name: 'rejecting-pool' });
    const token = await env.call('joinTokens.create', { poolId: pool.id });
    const tokenFile = join(scratch, 'reject-token');
    writeFileSync(tokenFile, `${token.token}\n`, { mode: 0o600 });
    const otherState = join(scratch, 'rejected-state');
    const joining = bcd([
      'join', '--url', `http://127.0.0.1:${port}`, '--token-file', tokenFile, '--state-dir', otherState, '--wait',
    ]); // prettier-ignore
    const request = await until('the pending request', async () => {
      const listed = await env.call<any>('joinRequests.list', { state: 'pending', poolId: pool.id });
      return listed.items[0];
    });
    await until('the pending line', async () => joining.err.some((line) => line.includes(': pending;')));
    await env.call('joinRequests.reject', { joinRequestId: request.id, reason: 'not one of ours' });
    expect(await joining.exited).toBe(1);
    expect(joining.out).toEqual([]);
    expect(joining.err).toEqual([
      `join request ${request.id}: pending; waiting for an operator to approve it (better-compute join-requests approve ${request.id})`,
      expect.stringMatching(new RegExp(`^join request ${request.id}: rejected after \\d+ s$`)),
      `RESOURCE_FAILED: join request ${request.id} was rejected: not one of ours; ask for a new join token to try again`,
    ]);
    // Nothing of a node was kept; the pending request was forgotten, so a new token starts afresh.
    expect(JSON.parse(readFileSync(join(otherState, 'join.json'), 'utf8'))).toEqual({});
    expect(() => readFileSync(join(otherState, 'node.json'))).toThrow();
    // --no-wait sends the request and answers at once with it, pending, for a later bcd join to wait on.
    const second = await env.call('joinTokens.create', { poolId: pool.id });
    writeFileSync(tokenFile, `${second.token}\n`, { mode: 0o600 });
    const sent = bcd([
      'join', '--url', `http://127.0.0.1:${port}`, '--token-file', tokenFile, '--state-dir', otherState, '--no-wait',
    ]); // prettier-ignore
    expect(await sent.exited).toBe(0);
    const answer = JSON.parse(sent.out.join(''));
    expect(answer).toEqual({
      nodeId: null,
      joinRequestId: expect.stringMatching(/^jreq_/),
      state: 'pending',
      stateDir: otherState,
    });
    const both = bcd([
      'join',
      '--url',
      'http://127.0.0.1:1',
      '--token-file',
      tokenFile,
      '--wait',
      '--no-wait',
    ]);
    expect(await both.exited).toBe(2);
    expect(both.err[0]).toBe('INVALID_ARGUMENT: bcd join takes --wait (the default) or --no-wait, not both');
    await env.call('joinRequests.reject', { joinRequestId: answer.joinRequestId });
  });

  it('bcd run says Hello over the session: the node is ready with its capabilities and the machine’s disks and NICs', async () => {
    daemon = runDaemon();
    const node = await until('the node to be ready', async () => {
      const n = await env.call<any>('nodes.get', { nodeId });
      return n.state === 'ready' ? n : undefined;
    });
    expect(node.gpuCount).toBe(1);
    const rows = await until('the session’s hello to be recorded', async () => {
      const found = await sql<any>`select * from compute.node_sessions where node_id = ${nodeId}`.execute(
        env.compute.database.db,
      );
      return found.rows.length ? found.rows : undefined;
    });
    expect(rows[0].capabilities).toEqual(
      expect.arrayContaining(['pty', 'tunnel.instance-dial', 'exec.script']),
    );
    expect(rows[0].daemon_version).toBe('0.1.0');
    expect(rows[0].hardware.nics.length + rows[0].hardware.disks.length).toBeGreaterThan(0);
    // The command root was pinned at the first session.
    await until('the command root to be pinned', async () =>
      String(JSON.parse(readFileSync(join(stateDir, 'node.json'), 'utf8')).commandRoot).includes(
        'BEGIN PUBLIC KEY',
      ),
    );
    const status = bcd(['status', '--state-dir', stateDir]);
    expect(await status.exited).toBe(0);
    const shown = JSON.parse(status.out.join('\n'));
    expect(shown).toMatchObject({ joined: true, nodeId, commandRootPinned: true });
    expect(status.out.join('\n')).not.toContain(nodeCredential);
  });

  it('reports an inventory change as it happens: inventory diff shows the added GPU', async () => {
    writeFileSync(gpuFile, JSON.stringify({ gpus: [gpu(0), gpu(1)] }));
    await until(
      'a second inventory revision',
      async () => (await env.call<any>('inventory.get', { nodeId })).revision >= 2,
    );
    const diff = await env.call<any>('inventory.diff', { nodeId });
    expect(diff.changes).toEqual(
      expect.arrayContaining([expect.objectContaining({ path: 'gpus[1]', kind: 'added' })]),
    );
  });

  it('runs commands in order, with exit codes and output; a failing script is failed with its stderr', async () => {
    const first = await env.call<any>('commands.run', {
      nodeId,
      kind: 'exec.script',
      payload: { script: 'mark' },
    });
    const second = await env.call<any>('commands.run', {
      nodeId,
      kind: 'exec.script',
      payload: { script: 'fail' },
    });
    const third = await env.call<any>('commands.run', { nodeId, kind: 'inventory.refresh' });
    const done = await settled(first.id);
    expect(done).toMatchObject({ exitCode: 0, stdout: 'marked\n', attempt: 1 });
    expect(await settled(second.id, 'failed')).toMatchObject({ exitCode: 3, stderr: 'broken\n' });
    expect((await settled(third.id)).result).toMatchObject({ gpus: 2 });
    const c2 = await command(second.id);
    const c3 = await command(third.id);
    expect(new Date(done.finishedAt) <= new Date(c2.startedAt)).toBe(true);
    expect(new Date(c2.finishedAt) <= new Date(c3.startedAt)).toBe(true);
    const listed = await env.call<any>('commands.list', { nodeId });
    expect(listed.items.map((c: any) => c.id)).toEqual([first.id, second.id, third.id]);
  });

  it('a script that is not installed fails; a payload that does not fit its kind is refused', async () => {
    const missing = await env.call<any>('commands.run', {
      nodeId,
      kind: 'exec.script',
      payload: { script: 'rm-rf' },
    });
    expect((await settled(missing.id, 'failed')).error).toContain('no maintenance script');
    await expect(
      env.call('commands.run', { nodeId, kind: 'exec.script', payload: { script: '../../bin/sh' } }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(env.call('commands.run', { nodeId, kind: 'exec.script' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
  });

  it('a command queued while the daemon is down runs once it is back; one it was running when killed is never run again', async () => {
    const before = runs('slow');
    const slow = await env.call<any>('commands.run', {
      nodeId,
      kind: 'exec.script',
      payload: { script: 'slow' },
    });
    await startedOnNode(slow.id, 'slow', before);
    daemon!.child.kill('SIGKILL');
    await daemon!.exited;
    const queued = await env.call<any>('commands.run', {
      nodeId,
      kind: 'exec.script',
      payload: { script: 'mark' },
    });
    daemon = runDaemon();
    const interrupted = await settled(slow.id, 'failed');
    expect(interrupted.error).toContain('not run again');
    await settled(queued.id);
    await new Promise((resolve) => setTimeout(resolve, 3500));
    expect(runs('slow')).toBe(1);
    expect(runs('mark')).toBe(2);
  });

  it('a command whose result was lost with a killed server is redelivered and not run twice', async () => {
    const before = runs('slow');
    const slow = await env.call<any>('commands.run', {
      nodeId,
      kind: 'exec.script',
      payload: { script: 'slow' },
    });
    await startedOnNode(slow.id, 'slow', before);
    server!.child.kill('SIGKILL');
    await server!.exited;
    // The daemon finishes while no gateway listens; its report has nowhere to go.
    await new Promise((resolve) => setTimeout(resolve, 3500));
    server = await startServer(env.database.url!, port, keyFile);
    const done = await settled(slow.id, 'succeeded');
    expect(done.stdout).toBe('slept\n');
    expect(runs('slow')).toBe(2);
  }, 120_000);

  it('cancel: a queued command never runs, a running one is stopped', async () => {
    const running = await env.call<any>('commands.run', {
      nodeId,
      kind: 'exec.script',
      payload: { script: 'sleep' },
    });
    const queued = await env.call<any>('commands.run', {
      nodeId,
      kind: 'exec.script',
      payload: { script: 'mark' },
    });
    await until('sleep to run', async () => (await command(running.id)).state === 'running');
    await env.call<any>('commands.cancel', { commandId: queued.id });
    expect((await settled(queued.id, 'cancelled')).error).toBe('cancelled before it ran');
    const asked = await env.call<any>('commands.cancel', { commandId: running.id });
    expect(asked).toMatchObject({ state: 'running', cancelRequested: true });
    const stopped = await settled(running.id, 'cancelled');
    expect(stopped.error).toBe('cancelled while it ran');
    await expect(env.call('commands.cancel', { commandId: running.id })).rejects.toMatchObject({
      code: 'INVALID_STATE',
    });
    expect(runs('mark')).toBe(2);
  });

  it('another tenant sees none of the node’s commands and cannot cancel them', async () => {
    const [first] = (await env.call<any>('commands.list', { nodeId })).items;
    await expect(env.call('commands.get', { commandId: first.id }, 'acme')).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
    await expect(env.call('commands.cancel', { commandId: first.id }, 'acme')).rejects.toMatchObject({
      code: expect.stringMatching(/NOT_FOUND|ACCESS_DENIED/),
    });
    expect(
      (await env.call<any>('commands.list', { nodeId }, 'acme').catch(() => ({ items: [] }))).items,
    ).toEqual([]);
    await expect(
      env.call('commands.run', { nodeId, kind: 'inventory.refresh' }, 'acme'),
    ).rejects.toMatchObject({ code: expect.stringMatching(/NOT_FOUND|ACCESS_DENIED/) });
  });

  it('SIGTERM lets the daemon finish what it runs, then it exits 0', async () => {
    const before = runs('slow');
    const slow = await env.call<any>('commands.run', {
      nodeId,
      kind: 'exec.script',
      payload: { script: 'slow' },
    });
    await startedOnNode(slow.id, 'slow', before);
    daemon!.child.kill('SIGTERM');
    expect(await daemon!.exited).toBe(0);
    expect((await command(slow.id)).state).toBe('succeeded');
    daemon = undefined;
  });
});

describe('node maintenance workflows against the real daemon', () => {
  const workflow = (id: string) => env.call<any>('workflows.get', { workflowId: id });
  const reaches = (id: string, state: string) =>
    until(`${id} to be ${state}`, async () => {
      const w = await workflow(id);
      return w.state === state ? w : undefined;
    });
  const cli = async (args: string[]) => {
    const run = start(
      join(import.meta.dirname, '..', '..', 'better-compute', 'bin', 'better-compute.cjs'),
      [...args, '--url', `http://127.0.0.1:${port}`, '--tenant', 'root', '--format', 'compact'],
      {
        BETTER_COMPUTE_TOKEN: env.rootKey,
      },
    );
    const code = await run.exited;
    if (code !== 0) throw new Error(`${args.join(' ')} exited ${code}: ${run.err.join('\n')}`);
    return JSON.parse(run.out.join('\n'));
  };

  beforeAll(async () => {
    daemon = runDaemon();
    await until(
      'the node to be ready again',
      async () => (await env.call<any>('nodes.get', { nodeId })).state === 'ready',
    );
  });

  it('drains, runs the maintenance script, uncordons; each step has its command and timings; each transition is an event', async () => {
    const started = await env.call<any>('workflows.create', {
      nodeId,
      script: 'mark',
      reason: 'kernel update',
    });
    expect(started).toMatchObject({ state: 'running', kind: 'node.maintenance', currentStep: 0 });
    const done = await reaches(started.id, 'succeeded');
    expect(done.steps.map((s: any) => [s.kind, s.state])).toEqual([
      ['node.drain', 'succeeded'],
      ['node.wait-drained', 'succeeded'],
      ['command', 'succeeded'],
      ['node.uncordon', 'succeeded'],
    ]);
    expect(done.steps.every((s: any) => s.startedAt && s.finishedAt)).toBe(true);
    const scriptCommand = await command(done.steps[2].commandId);
    expect(scriptCommand).toMatchObject({ workflowId: started.id, state: 'succeeded', stdout: 'marked\n' });
    expect((await env.call<any>('nodes.get', { nodeId })).state).toBe('ready');
    // The outbox shows a transaction's events once every older transaction has ended, so the last
    // event may appear a moment after the workflow reads succeeded.
    const types = await until('the workflow’s last event', async () => {
      const events = await env.call<any>('events.list', { type: 'workflow.', limit: 100 });
      const found = events.items.filter((e: any) => e.subject.id === started.id).map((e: any) => e.type);
      return found.at(-1) === 'workflow.succeeded' ? found : undefined;
    });
    expect(types[0]).toBe('workflow.started');
    expect(types).toContain('workflow.step_succeeded');
    expect(types.at(-1)).toBe('workflow.succeeded');
    // The CLI against the real server: workflows and commands of the node.
    const listed = await cli(['workflows', 'list', '--node', nodeId]);
    expect(listed.items[0]).toMatchObject({ id: started.id, state: 'succeeded' });
    const shown = await cli(['workflows', 'get', started.id]);
    expect(shown.steps).toHaveLength(4);
    const commands = await cli(['commands', 'list', '--node', nodeId, '--state', 'succeeded']);
    expect(commands.items.map((c: any) => c.id)).toContain(done.steps[2].commandId);
  });

  it('paused, it starts no further step until resumed', async () => {
    const started = await env.call<any>('workflows.create', { nodeId, script: 'slow' });
    await until('the script to run', async () => (await workflow(started.id)).steps[2].commandId !== null);
    const paused = await env.call<any>('workflows.pause', { workflowId: started.id });
    expect(paused.state).toBe('paused');
    await settled((await workflow(started.id)).steps[2].commandId);
    await new Promise((resolve) => setTimeout(resolve, 1200));
    expect((await workflow(started.id)).state).toBe('paused');
    expect((await env.call<any>('nodes.get', { nodeId })).state).toBe('drained');
    await expect(env.call('workflows.pause', { workflowId: started.id })).rejects.toMatchObject({
      code: 'INVALID_STATE',
    });
    await expect(env.call('workflows.create', { nodeId, script: 'mark' })).rejects.toMatchObject({
      code: 'CONFLICT',
    });
    expect((await env.call<any>('workflows.resume', { workflowId: started.id })).state).toBe('running');
    await reaches(started.id, 'succeeded');
    expect((await env.call<any>('nodes.get', { nodeId })).state).toBe('ready');
  });

  it('a failed step fails the workflow; retry runs it again from that step', async () => {
    const started = await env.call<any>('workflows.create', { nodeId, script: 'flaky' });
    const failed = await reaches(started.id, 'failed');
    expect(failed.currentStep).toBe(2);
    expect(failed.steps[2]).toMatchObject({ state: 'failed', attempt: 1 });
    expect(failed.steps[2].error).toContain('exit code 1');
    expect(failed.steps[3].state).toBe('pending');
    const firstCommand = failed.steps[2].commandId;
    expect((await command(firstCommand)).stderr).toBe('not yet\n');
    await expect(env.call('workflows.resume', { workflowId: started.id })).rejects.toMatchObject({
      code: 'INVALID_STATE',
    });
    const retried = await env.call<any>('workflows.retry', { workflowId: started.id });
    expect(retried.state).toBe('running');
    const done = await reaches(started.id, 'succeeded');
    expect(done.steps[2]).toMatchObject({ state: 'succeeded', attempt: 2 });
    expect(done.steps[2].commandId).not.toBe(firstCommand);
    expect(done.steps[0].attempt).toBe(1);
  });

  it('abort stops the workflow and cancels its running command', async () => {
    const started = await env.call<any>('workflows.create', { nodeId, script: 'sleep' });
    const running = await until('the script to run', async () => {
      const w = await workflow(started.id);
      return w.steps[2].commandId && (await command(w.steps[2].commandId)).state === 'running'
        ? w
        : undefined;
    });
    const aborted = await env.call<any>('workflows.abort', { workflowId: started.id });
    expect(aborted.state).toBe('aborted');
    expect(aborted.steps.slice(2).map((s: any) => s.state)).toEqual(['skipped', 'skipped']);
    await settled(running.steps[2].commandId, 'cancelled');
    await expect(env.call('workflows.retry', { workflowId: started.id })).rejects.toMatchObject({
      code: 'INVALID_STATE',
    });
    await expect(env.call('workflows.get', { workflowId: started.id }, 'acme')).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
    await env.call('nodes.uncordon', { nodeId });
  });
});
