/**
 * The destructive-batch quorum end to end, with real parts (issue 34): a server (roles api,
 * controllers, gateway) whose PKI bundle names a 2-of-3 approver set installed by `pki approvers`,
 * three real `bcd` nodes, each with its own state and a power-off script that appends to its own
 * marks file, and the real `better-compute` binary for every approver step (the token only ever in
 * the environment). One approval holds the batch and nothing reaches a node; a second, signed
 * offline from `batch show --scope-out`, releases it and each node powers off exactly once.
 *
 * Then what a compromised control plane or database could try, and who stops it: a metal.power row
 * forged into compute.commands, an approved member copied under a new command id, a member whose
 * payload was changed after the approvers reviewed it, and an exec.script naming a power script
 * are refused by the node itself; a scope changed after review is refused by `batch approve --root`,
 * an approval signed for another trust domain by the CLI and by the server, and an approval for a
 * batch whose window closed by the server. Last, the power scripts the package ships (and
 * `daemon install-script` installs): shellcheck, and what they schedule, run against a stand-in
 * systemd-run so this machine stays up.
 */
import { createPrivateKey } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@better-compute/core';
import { fromHex, type ScopeLeaf, scopeTree, signApproval, toHex } from '@better-compute/core/quorum';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createPkiBundle } from '../../better-compute/src/pki/create.js';
import {
  bcd,
  bcdJoin,
  daemonConnected,
  type Deployment,
  deployment,
  type Proc,
  root,
  until,
} from './daemon-support.js';
import { cliIn, codeOf, rootCall, serveHere } from './served-support.js';

vi.setConfig({ testTimeout: 90_000, hookTimeout: 180_000 });

const secret = 'the quorum fleet test deployment secret';
const TRUST_DOMAIN = 'fleet.test';
const scratch = mkdtempSync(join(tmpdir(), 'bcd-quorum-fleet-'));
const pkiPath = join(scratch, 'pki.json');

let env: Deployment;
let url = '';
let stopServer: (() => Promise<void>) | undefined;

interface FleetNode {
  id: string;
  dir: string;
  stateDir: string;
  marks: string;
  /** What `bcd join` said on standard error. */
  joinLog: string;
  daemon: Proc;
}
const nodes: FleetNode[] = [];
/** The rack's power-off batch, approved by two of the three: the refusals below replay it. */
let batch: any;

const served = () => ({ url, rootKey: env.rootKey });
const { cli, cliJson } = cliIn(scratch, served);
/** A call to the served API as the root administrator, answering the data or the error. */
const api = (method: string, body: Record<string, unknown>) => rootCall(served(), method, body);

const marks = (node: FleetNode) =>
  existsSync(node.marks) ? readFileSync(node.marks, 'utf8').split('\n').filter(Boolean) : [];
const allMarks = () => nodes.map(marks);

let files = 0;
function writeJson(value: unknown): string {
  const name = `file-${files++}.json`;
  writeFileSync(join(scratch, name), JSON.stringify(value));
  return name;
}
const powerOff = (subjects: string[]): ScopeLeaf[] =>
  subjects.map((subject) => ({ subject, kind: 'metal.power', payload: { action: 'off' } }));

/** `batch create` through the binary: the new batch. */
const createBatch = (leaves: ScopeLeaf[], reason: string) =>
  cliJson(['batch', 'create', '--reason', reason, '--scope', writeJson(leaves)]);

const members = async (batchId: string) =>
  (await cliJson<{ items: any[] }>(['batch', 'members', '--batch', batchId])).items;

/** Waits until every member of the batch has ended, and answers them in leaf order. */
const membersEnded = (batchId: string) =>
  until(
    `the members of ${batchId} to end`,
    async () => {
      const items = await members(batchId);
      return items.every((m) => ['succeeded', 'failed', 'cancelled'].includes(m.state)) && items;
    },
    45_000,
  );

/**
 * A plain command to every node, run to its end: the gateway has had its passes over each node's
 * open commands since whatever the caller did before, so a member it held would have gone out.
 */
async function gatewayPassedEveryNode(): Promise<void> {
  for (const node of nodes) {
    const command = await env.call<{ id: string }>('commands.run', {
      nodeId: node.id,
      kind: 'inventory.refresh',
    });
    await until(`${command.id} to succeed`, async () => {
      const found = await env.call<{ state: string }>('commands.get', { commandId: command.id });
      return found.state === 'succeeded';
    });
  }
}

/** A command row written straight into the database, as whoever owns it could; answers its id. */
async function forgeCommand(row: Record<string, unknown>): Promise<string> {
  const id = newId('command');
  await env.database.db
    .insertInto('compute.commands')
    .values({
      id,
      tenant_id: 'root',
      kind: 'metal.power',
      payload: JSON.stringify({ action: 'off' }),
      created_at: new Date(),
      expires_at: new Date(Date.now() + 600_000),
      ...row,
    })
    .execute();
  return id;
}

/** Waits for a command (by id, read from the database) to end; answers its state and error. */
const commandEnded = (commandId: string) =>
  until(`${commandId} to end`, async () => {
    const row = await env.database.db
      .selectFrom('compute.commands')
      .select(['state', 'error'])
      .where('id', '=', commandId)
      .executeTakeFirst();
    return row && ['succeeded', 'failed', 'cancelled'].includes(row.state) ? row : undefined;
  });

beforeAll(async () => {
  env = await deployment();

  // Three approvers make their keys as the guide says; the operator installs their public halves.
  for (const name of ['k1', 'k2', 'k3'])
    await cliJson(['batch', 'keygen', '--out', `${name}.pem`], { offline: true });
  await createPkiBundle({ path: pkiPath, secret, trustDomain: TRUST_DOMAIN });
  const installed = await cliJson(
    [
      'pki',
      'approvers',
      '--pki',
      pkiPath,
      '--threshold',
      '2',
      ...['k1', 'k2', 'k3'].flatMap((k) => ['--pub', `${k}.pem.pub`]),
    ],
    { offline: true },
  );
  expect(installed).toMatchObject({ epoch: 1, threshold: 2 });

  // The server, on the deployment's database, signing with the bundle and reading its approvers.
  const server = await serveHere({ database: env.database.url!, pki: pkiPath, secret, rateLimit: false });
  url = server.url;
  stopServer = server.stop;

  // Three machines of one pool, each its own bcd with its own state, scripts and marks file.
  const site = await env.call('sites.create', { name: 'quorum-rack' });
  const pool = await env.call('pools.create', { siteId: site.id, name: 'quorum-rack' });
  const token = await env.call('joinTokens.create', { poolId: pool.id, uses: 3, preApproved: true });
  // The first machine pins the published set as it joins; the others pin it at their first welcome.
  const published = join(scratch, 'published-set.json');
  writeFileSync(
    published,
    JSON.stringify(
      await cliJson(['pki', 'show', '--pki', pkiPath, '--query', 'approvers.set'], { offline: true }),
    ),
  );
  for (let i = 0; i < 3; i++) {
    const dir = join(scratch, `node-${i}`);
    const stateDir = join(dir, 'state');
    const scriptsDir = join(dir, 'scripts');
    mkdirSync(scriptsDir, { recursive: true });
    const marksFile = join(dir, 'marks');
    // Power scripts that only say they ran: the package's own would schedule a real power-off.
    writeFileSync(join(scriptsDir, 'power-off.sh'), `echo off >> '${marksFile}'\n`);
    writeFileSync(join(scriptsDir, 'power-reset.sh'), `echo reset >> '${marksFile}'\n`);
    const joined = await bcdJoin(url, token.token, dir, stateDir, i === 0 ? ['--approvers', published] : []);
    const daemon = bcd([
      'run',
      '--state-dir',
      stateDir,
      '--scripts-dir',
      scriptsDir,
      '--ssh-dir',
      join(dir, 'ssh'),
    ]);
    nodes.push({
      id: JSON.parse(joined.out[0]!).nodeId,
      dir,
      stateDir,
      marks: marksFile,
      daemon,
      joinLog: joined.err.join('\n'),
    });
  }
  for (const node of nodes) await daemonConnected(node.stateDir);
}, 180_000);

afterAll(async () => {
  for (const node of nodes) node.daemon.child.kill('SIGTERM');
  await Promise.all(
    nodes.map((node) =>
      Promise.race([node.daemon.exited, new Promise((resolve) => setTimeout(resolve, 10_000))]).then(() =>
        node.daemon.child.kill('SIGKILL'),
      ),
    ),
  );
  await stopServer?.();
  await env?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('a 2-of-3 quorum over three real nodes', () => {
  it('each node pins the approver set the deployment publishes', async () => {
    const published = await cliJson(['pki', 'show', '--pki', pkiPath, '--query', 'approvers.set'], {
      offline: true,
    });
    expect(published).toMatchObject({ trustDomain: TRUST_DOMAIN, epoch: 1, threshold: 2 });
    // The first pinned it at join, from --approvers; its first welcome found the same set.
    expect(nodes[0]!.joinLog).toContain('pinned the approver set of epoch 1 (2 of 3) from --approvers');
    for (const node of nodes.slice(1)) {
      await until('the node to pin the approver set', async () =>
        node.daemon.err.includes('bcd: pinned the approver set of epoch 1 (2 of 3)'),
      );
    }
    expect(nodes[0]!.daemon.err.join('\n')).not.toContain('bcd: pinned the approver set');
    for (const node of nodes) {
      expect(JSON.parse(readFileSync(join(node.stateDir, 'approvers.json'), 'utf8')).set).toEqual(published);
    }
  });

  it('bcd join refuses an --approvers file that is not an approver set, before asking to join', async () => {
    const dir = join(scratch, 'refused-join');
    mkdirSync(dir, { recursive: true });
    const bad = join(dir, 'set.json');
    const set = JSON.parse(readFileSync(join(scratch, 'published-set.json'), 'utf8'));
    writeFileSync(bad, JSON.stringify({ ...set, threshold: 0 }));
    writeFileSync(join(dir, 'token'), 'bcjt_not-a-token\n', { mode: 0o600 });
    const joining = bcd([
      'join',
      ...['--url', url, '--token-file', join(dir, 'token'), '--state-dir', join(dir, 'state')],
      ...['--approvers', bad],
    ]);
    expect(await joining.exited).toBe(1);
    expect(joining.err.join('\n')).toMatch(/^INVALID_ARGUMENT: --approvers .*"threshold"/m);
    expect(existsSync(join(dir, 'state', 'node.json'))).toBe(false);
  });

  it('one approval holds the batch: its members wait and nothing reaches a node', async () => {
    batch = await createBatch(powerOff(nodes.map((n) => n.id)), 'power off the quorum rack for the PDU swap');
    expect(batch).toMatchObject({ state: 'pending', size: 3, approvalsNeeded: 2, trustDomain: TRUST_DOMAIN });
    const first = await cliJson(['batch', 'approve', '--batch', batch.id, '--key', 'k1.pem', '--yes']);
    expect(first).toMatchObject({ state: 'pending' });
    expect(first.approvals).toHaveLength(1);

    await gatewayPassedEveryNode();
    const held = await members(batch.id);
    expect(held.map((m) => [m.nodeId, m.awaitingApproval, m.state])).toEqual(
      nodes.map((n) => [n.id, true, 'queued']),
    );
    expect(allMarks()).toEqual([[], [], []]);
  });

  it('a second approval, signed offline from the scope file, releases it: each node powers off once', async () => {
    const shown = await cliJson(['batch', 'show', '--batch', batch.id, '--scope-out', 'scope.json']);
    expect(shown).toMatchObject({ batchId: batch.id, root: batch.root, size: 3 });
    const signed = await cli(
      ['batch', 'sign', '--key', 'k2.pem', '--scope', 'scope.json', '--out', 'approval.json'],
      {
        offline: true,
      },
    );
    expect(signed.status, signed.stderr).toBe(0);
    const approved = await cliJson(['batch', 'approve', '--batch', batch.id, '--signature', 'approval.json']);
    expect(approved).toMatchObject({ state: 'approved' });
    expect(approved.approvals).toHaveLength(2);

    const ended = await membersEnded(batch.id);
    expect(ended.map((m) => [m.nodeId, m.state, m.awaitingApproval, m.error])).toEqual(
      nodes.map((n) => [n.id, 'succeeded', false, null]),
    );
    for (const node of nodes)
      expect(
        node.daemon.err.some((line) => line.includes("(metal.power) carries its batch's approvals")),
      ).toBe(true);
    // Once each, and still once after the gateway has had more passes.
    await gatewayPassedEveryNode();
    expect(allMarks()).toEqual([['off'], ['off'], ['off']]);
  });
});

describe('what the nodes refuse, whatever the control plane sends', () => {
  it('a metal.power row forged straight into the database, with no batch', async () => {
    const forged = await forgeCommand({ node_id: nodes[0]!.id });
    expect(await commandEnded(forged)).toEqual({
      state: 'failed',
      error:
        "refused by the node: a metal.power command runs only with its batch's approvals, and none came with it",
    });
    expect(allMarks()).toEqual([['off'], ['off'], ['off']]);
  });

  it('an approved member copied under a new command id: a replayed approval', async () => {
    const [original] = await members(batch.id);
    const row = await env.database.db
      .selectFrom('compute.commands')
      .select(['batch_id', 'batch_index', 'batch_proof'])
      .where('id', '=', original.commandId)
      .executeTakeFirstOrThrow();
    // Whoever owns the database is not held by its constraints: one member per leaf is one of them.
    await sql`drop index compute.commands_batch_members`.execute(env.database.db);
    const copy = await forgeCommand({
      node_id: nodes[0]!.id,
      batch_id: row.batch_id,
      batch_index: row.batch_index,
      batch_proof: JSON.stringify(row.batch_proof),
    });
    expect(await commandEnded(copy)).toEqual({
      state: 'failed',
      error: `refused by the node: leaf 0 of batch ${batch.id} already ran on this node as ${original.commandId}; an approval runs its command once`,
    });
    expect(allMarks()).toEqual([['off'], ['off'], ['off']]);
  });

  it('a member whose payload was changed after the approvers reviewed the batch', async () => {
    const changed = await createBatch(powerOff([nodes[1]!.id]), 'power off node 1 for its disk swap');
    await cliJson(['batch', 'approve', '--batch', changed.id, '--key', 'k1.pem', '--yes']);
    const [member] = await members(changed.id);
    await env.database.db
      .updateTable('compute.commands')
      .set({ payload: JSON.stringify({ action: 'reset' }) })
      .where('id', '=', member.commandId)
      .execute();
    const approved = await cliJson(['batch', 'approve', '--batch', changed.id, '--key', 'k3.pem', '--yes']);
    expect(approved).toMatchObject({ state: 'approved' });
    const [ended] = await membersEnded(changed.id);
    expect(ended).toMatchObject({ state: 'failed', payload: { action: 'reset' } });
    expect(ended.error).toBe(
      `refused by the node: the command is not in batch ${changed.id}'s scope: the proof does not lead to the root`,
    );
    expect(allMarks()).toEqual([['off'], ['off'], ['off']]);
  });

  it('an exec.script that names a power script: the API refuses it, and the node refuses a forged one', async () => {
    await expect(
      env.call('commands.run', {
        nodeId: nodes[2]!.id,
        kind: 'exec.script',
        payload: { script: 'power-off' },
      }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    const forged = await forgeCommand({
      node_id: nodes[2]!.id,
      kind: 'exec.script',
      payload: JSON.stringify({ script: 'power-off' }),
    });
    expect(await commandEnded(forged)).toEqual({
      state: 'failed',
      error: "power-off is a power script: it runs only as metal.power, with its batch's approvals",
    });
    expect(allMarks()).toEqual([['off'], ['off'], ['off']]);
  });
});

describe('what the approvers’ tools and the server refuse', () => {
  it('a scope changed in the database after review: batch approve --root says SCOPE_CHANGED', async () => {
    const leaves = powerOff(nodes.map((n) => n.id));
    const reviewed = await createBatch(leaves, 'power off the quorum rack again');
    const shown = await cliJson(['batch', 'show', '--batch', reviewed.id]);
    expect(shown.root).toBe(reviewed.root);
    // The leaf and the root both rewritten, so the scope still adds up: only the reviewed root tells.
    const swapped: ScopeLeaf[] = [leaves[0]!, leaves[1]!, { ...leaves[2]!, payload: { action: 'reset' } }];
    await env.database.db
      .updateTable('compute.command_batch_leaves')
      .set({ payload: JSON.stringify({ action: 'reset' }) })
      .where('batch_id', '=', reviewed.id)
      .where('idx', '=', 2)
      .execute();
    await env.database.db
      .updateTable('compute.command_batches')
      .set({ root: toHex(scopeTree(swapped).root) })
      .where('id', '=', reviewed.id)
      .execute();
    const refused = await cli([
      'batch',
      'approve',
      '--batch',
      reviewed.id,
      '--key',
      'k1.pem',
      '--root',
      reviewed.root,
    ]);
    expect(refused.status).not.toBe(0);
    expect(codeOf(refused)).toBe('SCOPE_CHANGED');
    expect(refused.stderr).toContain(`not the --root ${reviewed.root} you reviewed`);
    // Only the leaf rewritten: the scope no longer gives the batch's root, and nothing is signed.
    await env.database.db
      .updateTable('compute.command_batches')
      .set({ root: reviewed.root })
      .where('id', '=', reviewed.id)
      .execute();
    const mismatch = await cli(['batch', 'approve', '--batch', reviewed.id, '--key', 'k1.pem', '--yes']);
    expect(codeOf(mismatch)).toBe('SCOPE_MISMATCH');
    expect((await api('commandBatches.get', { batchId: reviewed.id })).data.approvals).toEqual([]);
  });

  it('an approval signed for another trust domain: refused by the CLI and by the server', async () => {
    const other = await createBatch(powerOff([nodes[2]!.id]), 'power off node 2');
    await cliJson(['batch', 'show', '--batch', other.id, '--scope-out', 'other-scope.json']);
    const scope = JSON.parse(readFileSync(join(scratch, 'other-scope.json'), 'utf8'));
    writeFileSync(
      join(scratch, 'elsewhere-scope.json'),
      JSON.stringify({ ...scope, trustDomain: 'elsewhere.test' }),
    );
    const signed = await cli(
      ['batch', 'sign', '--key', 'k2.pem', '--scope', 'elsewhere-scope.json', '--out', 'elsewhere.json'],
      { offline: true },
    );
    expect(signed.status, signed.stderr).toBe(0);
    const approval = JSON.parse(readFileSync(join(scratch, 'elsewhere.json'), 'utf8'));
    expect(approval).toMatchObject({ batchId: other.id, trustDomain: 'elsewhere.test' });

    const byCli = await cli(['batch', 'approve', '--batch', other.id, '--signature', 'elsewhere.json']);
    expect(codeOf(byCli)).toBe('SCOPE_MISMATCH');
    const byServer = await api('commandBatches.approve', {
      batchId: other.id,
      kid: approval.kid,
      signature: approval.signature,
    });
    expect(byServer.error).toMatchObject({ code: 'SCOPE_MISMATCH' });
    const after = (await api('commandBatches.get', { batchId: other.id })).data;
    expect(after).toMatchObject({ state: 'pending', approvals: [] });
  });

  it('a batch whose window has closed: approve says INVALID_STATE, and nothing of it runs', async () => {
    const closing = await createBatch(powerOff([nodes[2]!.id]), 'power off node 2, later');
    // A valid approval, made while the window was open.
    const statement = {
      batchId: closing.id,
      trustDomain: closing.trustDomain,
      root: fromHex(closing.root, 32)!,
      size: closing.size,
      notAfter: Date.parse(closing.notAfter),
    };
    const key = createPrivateKey(readFileSync(join(scratch, 'k3.pem')));
    const late = signApproval(key, statement);
    // The window closed (the database says so): an hour ago, an hour after it opened.
    await env.database.db
      .updateTable('compute.command_batches')
      .set({ created_at: new Date(Date.now() - 7_200_000), not_after: new Date(Date.now() - 3_600_000) })
      .where('id', '=', closing.id)
      .execute();
    const byCli = await cli(['batch', 'approve', '--batch', closing.id, '--key', 'k1.pem', '--yes']);
    expect(codeOf(byCli)).toBe('INVALID_STATE');
    const byServer = await api('commandBatches.approve', { batchId: closing.id, ...late });
    expect(byServer.error).toMatchObject({ code: 'INVALID_STATE' });
    expect((await api('commandBatches.get', { batchId: closing.id })).data).toMatchObject({
      state: 'expired',
      approvals: [],
    });
    await gatewayPassedEveryNode();
    const [member] = await members(closing.id);
    expect(member.state).not.toBe('succeeded');
    expect(allMarks()).toEqual([['off'], ['off'], ['off']]);
  });
});

describe('the power scripts bcd ships', () => {
  const shipped = join(root, 'packages', 'daemon', 'scripts');
  const scheduled = { off: 'poweroff', reset: 'reboot --force', cycle: 'reboot' } as const;

  it('pass shellcheck', () => {
    const checked = spawnSync(
      'shellcheck',
      ['-s', 'sh', ...Object.keys(scheduled).map((action) => join(shipped, `power-${action}.sh`))],
      { encoding: 'utf8' },
    );
    expect(checked.error).toBeUndefined();
    expect(checked.stdout + checked.stderr).toBe('');
    expect(checked.status).toBe(0);
  });

  // Run with a PATH holding only a stand-in systemd-run, so nothing is ever scheduled on this machine.
  it('schedule the action with systemd a few seconds ahead, and exit at once', () => {
    const bin = join(scratch, 'fake-systemd');
    const calls = join(bin, 'calls');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'systemd-run'), `#!/bin/sh\nprintf '%s\\n' "$@" > '${calls}'\n`, { mode: 0o755 });
    for (const [action, what] of Object.entries(scheduled)) {
      rmSync(calls, { force: true });
      const ran = spawnSync('/bin/sh', [join(shipped, `power-${action}.sh`)], {
        env: { PATH: bin },
        encoding: 'utf8',
        timeout: 10_000,
      });
      expect(ran.status, ran.stderr).toBe(0);
      expect(ran.stdout).toMatch(/ in 5s \(systemctl stop bcd-power\.timer cancels it\)\n$/);
      expect(readFileSync(calls, 'utf8').trim().split('\n')).toEqual([
        '--no-ask-password',
        '--quiet',
        '--unit=bcd-power',
        '--on-active=5s',
        '--timer-property=AccuracySec=1s',
        'systemctl',
        ...what.split(' '),
      ]);
    }
  });

  it('fail, scheduling nothing, on a machine without systemd-run', () => {
    const empty = join(scratch, 'no-systemd');
    mkdirSync(empty, { recursive: true });
    const ran = spawnSync('/bin/sh', [join(shipped, 'power-off.sh')], {
      env: { PATH: empty },
      encoding: 'utf8',
    });
    expect(ran.status).toBe(1);
    expect(ran.stderr).toBe('systemd-run is not installed: the power-off was not scheduled\n');
  });
});
