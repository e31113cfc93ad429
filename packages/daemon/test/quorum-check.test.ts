/**
 * bcd checks every destructive command against the approver set it pinned (issue 34 item 3): the
 * daemon's real session and command path (runAgent) against a gateway socket that sends what a
 * compromised control plane could, with real keys: an Ed25519 command root, P-256 approver keys, a
 * batch built with scopeTree and inclusionProof, approvals made with signApproval. A power-off
 * approved by two of three approvers runs the node's power script once; every other command is
 * refused by the node and runs nothing. The approver set is pinned on first use and changes only
 * along a chain signed by a threshold of the set pinned.
 */
import { createPrivateKey, generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type CommandEnvelope, envelopeBytes, newId } from '@better-compute/core';
import {
  type ApproverChainEntry,
  type ApproverSet,
  type BatchStatement,
  commandQuorum,
  generateApproverKey,
  readApproverSet,
  type ScopeLeaf,
  scopeLeafHash,
  scopeTree,
  signApproval,
  signApproverSet,
} from '@better-compute/core/quorum';
import { inclusionProof } from '@better-compute/core/merkle';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type WebSocket, WebSocketServer } from 'ws';
import { runAgent } from '../src/agent.js';
import { decideApproverSet } from '../src/approvers.js';
import { StateDir } from '../src/state.js';
import { until } from './daemon-support.js';

const TRUST_DOMAIN = 'compute.test';
const scratch = mkdtempSync(join(tmpdir(), 'bcd-quorum-'));
const stateDir = join(scratch, 'state');
const scriptsDir = join(scratch, 'scripts');
const ranFile = join(scriptsDir, 'ran.txt');
const me = newId('node');
const neighbour = newId('node');
const third = newId('node');

const commandRoot = generateKeyPairSync('ed25519');
const commandRootPem = commandRoot.publicKey.export({ type: 'spki', format: 'pem' }).toString();

interface Approver {
  kid: string;
  key: KeyObject;
  publicPem: string;
}
function approver(): Approver {
  const files = generateApproverKey();
  return { kid: files.kid, key: createPrivateKey(files.privatePem), publicPem: files.publicPem };
}
const [a1, a2, a3, a4] = [approver(), approver(), approver(), approver()] as [
  Approver,
  Approver,
  Approver,
  Approver,
];
const approverSet = (epoch: number, members: Approver[], threshold = 2): ApproverSet =>
  readApproverSet({
    trustDomain: TRUST_DOMAIN,
    epoch,
    threshold,
    approvers: members.map((m) => ({ publicKey: m.publicPem })),
  });
const epoch1 = approverSet(1, [a1, a2, a3]);
const epoch2 = approverSet(2, [a2, a3, a4]);
const changeBy = (...signers: Approver[]): ApproverChainEntry => ({
  set: epoch2,
  signatures: signers.map((s) => signApproverSet(s.key, s.kid, epoch2)),
});

/** The gateway end of the daemon's session: the welcome it sends, the results it hears. */
const gateway = {
  server: null as WebSocketServer | null,
  socket: null as WebSocket | null,
  approverSets: [] as unknown,
  welcomes: 0,
  results: new Map<string, Record<string, any>>(),
};
const logs: string[] = [];
const controller = new AbortController();
let agent: Promise<unknown> | undefined;

/** Closes the session; the daemon reconnects and is welcomed with `approverSets`. */
async function newSession(approverSets: unknown): Promise<void> {
  gateway.approverSets = approverSets;
  const before = gateway.welcomes;
  gateway.socket?.close(1001, 'the gateway restarts');
  await until('the daemon to be welcomed again', async () => gateway.welcomes > before, 10_000);
  // The welcome is handled once the daemon says its session is up.
  await until(
    'the daemon to take the welcome',
    async () => logs.filter((l) => l.includes('session up')).length >= gateway.welcomes,
  );
}

const pinned = () => JSON.parse(readFileSync(join(stateDir, 'approvers.json'), 'utf8')).set as ApproverSet;
const runs = () => (existsSync(ranFile) ? readFileSync(ranFile, 'utf8').split('\n').filter(Boolean) : []);

/** A batch of these leaves as the server builds it, and what the gateway sends with one member. */
function batch(leaves: ScopeLeaf[], options: { trustDomain?: string; notAfter?: number } = {}) {
  const tree = scopeTree(leaves);
  const hashes = leaves.map(scopeLeafHash);
  const statement: BatchStatement = {
    batchId: newId('batch'),
    trustDomain: options.trustDomain ?? TRUST_DOMAIN,
    root: tree.root,
    size: tree.size,
    notAfter: options.notAfter ?? Date.now() + 3_600_000,
  };
  return {
    statement,
    quorum: (index: number, signers: Approver[]) =>
      commandQuorum(
        statement,
        { index, proof: inclusionProof(hashes, index, tree.size), unbound: leaves[index]!.payload === null },
        signers.map((s) => signApproval(s.key, statement)),
      ),
  };
}
const power = (subject: string, action: string): ScopeLeaf => ({
  subject,
  kind: 'metal.power',
  payload: { action },
});
const rack = () => batch([power(me, 'off'), power(neighbour, 'off'), power(third, 'off')]);

/**
 * Sends a command as the gateway does, signed by the command root (a row the control plane holds,
 * forged or not), with `quorum` beside it; answers the daemon's result.
 */
async function run(
  payload: Record<string, unknown>,
  quorum?: unknown,
  id = newId('command'),
  kind = 'metal.power',
): Promise<{ id: string; state: string; error: string | null }> {
  const command: CommandEnvelope = {
    id,
    nodeId: me,
    kind,
    payload,
    issuedAt: new Date().toISOString(),
    expiresAt: new Date(Date.now() + 600_000).toISOString(),
  };
  const signature = sign(null, envelopeBytes(command), commandRoot.privateKey).toString('base64');
  gateway.results.delete(id);
  gateway.socket!.send(
    JSON.stringify({ t: 'command', command, signature, ...(quorum === undefined ? {} : { quorum }) }),
  );
  const result = await until(`the result of ${id}`, async () => gateway.results.get(id), 15_000);
  return { id, state: result.state, error: result.error };
}

beforeAll(async () => {
  mkdirSync(scriptsDir, { recursive: true });
  // The node's power script: it appends a line where the test can count the runs.
  writeFileSync(join(scriptsDir, 'power-off.sh'), 'echo off >> ran.txt\n');
  writeFileSync(join(scriptsDir, 'power-reset.sh'), 'echo reset >> ran.txt\n');
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  gateway.server = server;
  await new Promise((resolve) => server.once('listening', resolve));
  server.on('connection', (socket) => {
    gateway.socket = socket;
    socket.on('message', (data) => {
      const message = JSON.parse(data.toString());
      if (message.t === 'hello') {
        gateway.welcomes += 1;
        socket.send(
          JSON.stringify({
            t: 'welcome',
            nodeId: me,
            state: 'ready',
            heartbeatIntervalSeconds: 60,
            commandRoot: commandRootPem,
            commandRootRotations: [],
            trustDomain: TRUST_DOMAIN,
            gateways: [],
            certificates: false,
            ...(gateway.approverSets === undefined ? {} : { approverSets: gateway.approverSets }),
          }),
        );
      }
      if (message.t === 'command.result') gateway.results.set(message.id, message);
    });
    socket.send(JSON.stringify({ t: 'ready' }));
  });
  const port = (server.address() as { port: number }).port;
  const state = new StateDir(stateDir);
  state.saveIdentity({
    url: `http://127.0.0.1:${port}`,
    nodeId: me,
    nodeCredential: 'node_test.credential',
    commandRoot: null,
  });
  agent = runAgent({
    state,
    scriptsDir,
    log: (line) => logs.push(line),
    signal: controller.signal,
    inventoryIntervalMs: 3_600_000,
    stopGraceMs: 1_000,
  });
  await until('the first welcome', async () => logs.some((l) => l.includes('session up')), 15_000);
}, 120_000);

afterAll(async () => {
  controller.abort();
  await agent;
  gateway.server?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('the daemon’s approver set', () => {
  it('pins nothing from a welcome without a chain, and refuses a destructive command then', async () => {
    expect(existsSync(join(stateDir, 'approvers.json'))).toBe(false);
    const b = rack();
    const refused = await run({ action: 'off' }, b.quorum(0, [a1, a2]));
    expect(refused.state).toBe('failed');
    expect(refused.error).toBe(
      'refused by the node: no approver set is pinned on this node, so no destructive command runs',
    );
    expect(runs()).toEqual([]);
  });

  it('pins the newest set of the first chain that verifies, in a 0600 file', async () => {
    await newSession([{ set: epoch1, signatures: [] }]);
    expect(pinned()).toEqual(epoch1);
    expect(statSync(join(stateDir, 'approvers.json')).mode & 0o777).toBe(0o600);
    expect(logs).toContain('bcd: pinned the approver set of epoch 1 (2 of 3)');
  });
});

describe('a destructive command on the node', () => {
  it('runs a power-off two of three approvers signed, once', async () => {
    const b = rack();
    const result = await run({ action: 'off' }, b.quorum(0, [a1, a3]));
    expect(result).toMatchObject({ state: 'succeeded', error: null });
    expect(runs()).toEqual(['off']);
  });

  it('refuses a command with one approval, and runs nothing', async () => {
    const b = rack();
    const result = await run({ action: 'off' }, b.quorum(0, [a2]));
    expect(result.error).toBe(
      `refused by the node: batch ${b.statement.batchId} has 1 valid approval(s) of the 2 the pinned approver set (epoch 1) needs`,
    );
    // One key twice is one approval.
    const twice = b.quorum(0, [a2]);
    twice.approvals.push(twice.approvals[0]!);
    expect((await run({ action: 'off' }, twice)).error).toMatch(/has 1 valid approval\(s\) of the 2/);
    expect(runs()).toEqual(['off']);
  });

  it('refuses a command row forged into the database, which comes with no quorum', async () => {
    const result = await run({ action: 'off' });
    expect(result.error).toBe(
      "refused by the node: a metal.power command runs only with its batch's approvals, and none came with it",
    );
    for (const quorum of [null, 'x', [], { batch: {} }])
      expect((await run({ action: 'off' }, quorum)).state).toBe('failed');
    expect(runs()).toEqual(['off']);
  });

  it('never runs a power script as a maintenance script, approvals or not', async () => {
    for (const script of ['power-off', 'power-reset'])
      expect(
        await run({ script }, rack().quorum(0, [a1, a2]), newId('command'), 'exec.script'),
      ).toMatchObject({
        state: 'failed',
        error: `${script} is a power script: it runs only as metal.power, with its batch's approvals`,
      });
    expect(runs()).toEqual(['off']);
  });

  it('refuses a leaf for another node and a leaf for another payload', async () => {
    const b = batch([power(me, 'reset'), power(neighbour, 'off')]);
    // The neighbour's approved leaf, cited for a command to this node.
    const neighbours = await run({ action: 'off' }, b.quorum(1, [a1, a2]));
    expect(neighbours.error).toMatch(
      /^refused by the node: the command is not in batch batch_\w+'s scope: the proof does not lead to the root$/,
    );
    // This node's leaf says reset; the command says off.
    const otherPayload = await run({ action: 'off' }, b.quorum(0, [a1, a2]));
    expect(otherPayload.error).toMatch(/is not in batch .*'s scope/);
    expect(runs()).toEqual(['off']);
  });

  it('refuses the same leaf again under a new command id, and answers a resent command from its ledger', async () => {
    const b = batch([power(me, 'reset')]);
    const quorum = b.quorum(0, [a2, a3]);
    const first = await run({ action: 'reset' }, quorum);
    expect(first.state).toBe('succeeded');
    const replayed = await run({ action: 'reset' }, quorum);
    expect(replayed.error).toBe(
      `refused by the node: leaf 0 of batch ${b.statement.batchId} already ran on this node as ${first.id}; an approval runs its command once`,
    );
    // The gateway sending the same command again (a new session, say) gets its outcome, not a second run.
    expect(await run({ action: 'reset' }, quorum, first.id)).toMatchObject({
      id: first.id,
      state: 'succeeded',
    });
    expect(runs()).toEqual(['off', 'reset']);
    const used = JSON.parse(readFileSync(join(stateDir, 'quorum-leaves.json'), 'utf8'));
    expect(used[`${b.statement.batchId}#0`]).toEqual({
      commandId: first.id,
      notAfter: new Date(b.statement.notAfter).toISOString(),
    });
  });

  it('refuses a batch whose window has closed and an approval for another trust domain', async () => {
    const closed = batch([power(me, 'off')], { notAfter: Date.now() - 1_000 });
    expect((await run({ action: 'off' }, closed.quorum(0, [a1, a2]))).error).toMatch(
      /^refused by the node: the batch's window closed at \d{4}-/,
    );
    const elsewhere = batch([power(me, 'off')], { trustDomain: 'other.test' });
    expect((await run({ action: 'off' }, elsewhere.quorum(0, [a1, a2, a3]))).error).toBe(
      'refused by the node: the batch is for trust domain other.test, the approver set for compute.test',
    );
    expect(runs()).toEqual(['off', 'reset']);
  });

  it('fails a power action with no script installed, and never says more than it should', async () => {
    const b = batch([power(me, 'cycle')]);
    expect((await run({ action: 'cycle' }, b.quorum(0, [a1, a2]))).error).toBe(
      'no power script power-cycle is installed on this node',
    );
    // A batch id full of terminal escapes and NUL bytes comes back bounded and without them.
    const hostile = rack().quorum(1, [a1, a2]);
    hostile.batch.batchId = `batch_\u0000\u001b[31m${'x'.repeat(60)}`;
    const refused = await run({ action: 'off' }, hostile);
    expect(refused.error).toMatch(
      /^refused by the node: the command is not in batch batch_ {2}\[31mx+'s scope/,
    );
    expect(refused.error!.length).toBeLessThan(600);
    expect(refused.error).not.toContain(hostile.approvals[0]!.signature);
    expect(runs()).toEqual(['off', 'reset']);
  });
});

describe('approver-set changes', () => {
  it('keeps epoch 1 when the epoch-2 set is signed by too few current approvers', async () => {
    // a4 is in the new set only: its signature counts for nothing until the new set is trusted.
    await newSession([{ set: epoch1, signatures: [] }, changeBy(a1, a4)]);
    expect(pinned()).toEqual(epoch1);
    expect(logs).toContain(
      "bcd: kept the pinned approver set of epoch 1: epoch 2: 1 of the current set's approvers signed the new set; 2 must",
    );
    // A chain that leaves the pinned set out, or is no chain at all, changes nothing either.
    await newSession([{ set: approverSet(1, [a4], 1), signatures: [] }]);
    expect(pinned()).toEqual(epoch1);
    await newSession('not a chain');
    expect(pinned()).toEqual(epoch1);
    // Still epoch 1: its approvers' power-off runs.
    expect((await run({ action: 'off' }, rack().quorum(0, [a1, a2]))).state).toBe('succeeded');
    expect(runs()).toEqual(['off', 'reset', 'off']);
  });

  it('adopts a correctly signed epoch-2 set, whose approvers alone then count', async () => {
    await newSession([{ set: epoch1, signatures: [] }, changeBy(a1, a2)]);
    expect(pinned()).toEqual(epoch2);
    expect(logs).toContain('bcd: followed the signed approver-set change from epoch 1 to 2 (2 of 3)');
    // a1 left the set: its approval with a2's is one of two.
    expect((await run({ action: 'off' }, rack().quorum(0, [a1, a2]))).error).toMatch(
      /1 valid approval\(s\) of the 2 .* \(epoch 2\) needs/,
    );
    expect((await run({ action: 'off' }, rack().quorum(0, [a2, a4]))).state).toBe('succeeded');
    expect(runs()).toEqual(['off', 'reset', 'off', 'off']);
  });

  it('keeps the pin when a later welcome carries an empty chain or none', async () => {
    await newSession([]);
    expect(pinned()).toEqual(epoch2);
    expect(
      logs.some((l) =>
        l.includes('kept the pinned approver set of epoch 2: the gateway sent no approver set'),
      ),
    ).toBe(true);
    await newSession(undefined);
    expect(pinned()).toEqual(epoch2);
    expect((await run({ action: 'off' }, rack().quorum(0, [a3, a4]))).state).toBe('succeeded');
    expect(runs()).toHaveLength(5);
  });
});

describe('decideApproverSet', () => {
  it('never throws on what a gateway may send', () => {
    for (const chain of [
      'x',
      7,
      {},
      [null],
      [{ set: null }],
      [{ set: epoch2, signatures: [] }],
      Array(5_000).fill({ set: epoch1 }),
    ])
      expect(decideApproverSet(epoch1, chain, TRUST_DOMAIN).kind).toBe('kept');
    expect(decideApproverSet(null, [{ set: epoch1, signatures: [] }], TRUST_DOMAIN)).toEqual({
      kind: 'pinned',
      set: epoch1,
    });
    expect(decideApproverSet(epoch1, [{ set: epoch1, signatures: [] }], TRUST_DOMAIN)).toEqual({
      kind: 'same',
    });
    expect(decideApproverSet(null, [], TRUST_DOMAIN)).toEqual({ kind: 'none' });
    // A first chain for another deployment's trust domain is not pinned.
    expect(decideApproverSet(null, [{ set: epoch1, signatures: [] }], 'other.test').kind).toBe('kept');
  });
});
