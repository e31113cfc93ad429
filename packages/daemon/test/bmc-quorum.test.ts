/**
 * A site agent's BMC power off through the destructive-batch quorum (docs/decisions/
 * metal-power-quorum.md): the daemon's real session and command path (runAgent, joined as a site
 * agent, an approver set pinned) against a gateway socket that sends signed metal.bmc commands, and
 * a Redfish BMC served over https. A power off that two of three approvers signed as a
 * metal.bmc-power leaf for this machine, this action and this agent runs and the machine goes off;
 * the same approvals sent with a command for another machine, or with a reset, are refused by the
 * node before the BMC is asked, as is an off with no approvals at all. Before the agent pins a set
 * (no quorum), an off the metal module sent directly runs as it always did.
 */
import { createPrivateKey, generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type CommandEnvelope, envelopeBytes, newId } from '@better-compute/core';
import { inclusionProof } from '@better-compute/core/merkle';
import {
  type BatchStatement,
  bmcEndpoint,
  commandQuorum,
  generateApproverKey,
  readApproverSet,
  type ScopeLeaf,
  scopeLeafHash,
  scopeTree,
  signApproval,
} from '@better-compute/core/quorum';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type WebSocket, WebSocketServer } from 'ws';
import { runAgent } from '../src/agent.js';
import { StateDir } from '../src/state.js';
import { until } from './daemon-support.js';
import {
  certificateAuthority,
  type RedfishEmulator,
  serverCertificate,
  startRedfishEmulator,
  stateBackend,
} from './metal/redfish-emulator.js';

const TRUST_DOMAIN = 'compute.test';
const USER = 'admin';
const PASSWORD = 'bmc-quorum-7c1e';
const scratch = mkdtempSync(join(tmpdir(), 'bcd-bmc-quorum-'));
const me = newId('node');
const machine = newId('node');
const otherMachine = newId('node');
const commandRoot = generateKeyPairSync('ed25519');

const approvers = [0, 1, 2].map(() => {
  const files = generateApproverKey();
  return { key: createPrivateKey(files.privatePem) as KeyObject, publicPem: files.publicPem };
});
const epoch1 = readApproverSet({
  trustDomain: TRUST_DOMAIN,
  epoch: 1,
  threshold: 2,
  approvers: approvers.map((a) => ({ publicKey: a.publicPem })),
});

const backend = stateBackend();
let bmc: RedfishEmulator;
/** The BMC part of a metal.bmc payload, as the gateway signs it (password included). */
let bmcFields: Record<string, unknown>;
const gateway = {
  server: null as WebSocketServer | null,
  socket: null as WebSocket | null,
  /** The chain the next welcome carries; none until the quorum is turned on. */
  approverSets: undefined as unknown,
  welcomes: 0,
};
const results = new Map<string, Record<string, any>>();
const logs: string[] = [];
const controller = new AbortController();
let agent: Promise<unknown> | undefined;

/** A batch of metal.bmc-power leaves, and the quorum the gateway sends with member `index`. */
function batch(leaves: ScopeLeaf[], signers: number) {
  const tree = scopeTree(leaves);
  const statement: BatchStatement = {
    batchId: newId('batch'),
    trustDomain: TRUST_DOMAIN,
    root: tree.root,
    size: tree.size,
    notAfter: Date.now() + 3_600_000,
  };
  const approvals = approvers.slice(0, signers).map((a) => signApproval(a.key, statement));
  return (index: number) =>
    commandQuorum(
      statement,
      { index, proof: inclusionProof(leaves.map(scopeLeafHash), index, tree.size), unbound: false },
      approvals,
    );
}
const leaf = (subject: string, action: 'off' | 'reset'): ScopeLeaf => ({
  subject,
  kind: 'metal.bmc-power',
  payload: { action, runner: me, bmc: bmcEndpoint(bmcFields) },
});

/** Sends a metal.bmc as the gateway does, signed by the command root; answers the result. */
async function run(payload: Record<string, unknown>, quorum?: unknown) {
  const id = newId('command');
  const command: CommandEnvelope = {
    id,
    nodeId: me,
    kind: 'metal.bmc',
    payload,
    issuedAt: new Date().toISOString(),
    expiresAt: new Date(Date.now() + 600_000).toISOString(),
  };
  const signature = sign(null, envelopeBytes(command), commandRoot.privateKey).toString('base64');
  gateway.socket!.send(
    JSON.stringify({ t: 'command', command, signature, ...(quorum === undefined ? {} : { quorum }) }),
  );
  const result = await until(`the result of ${id}`, async () => results.get(id), 30_000);
  return { state: result.state as string, error: result.error as string | null, result: result.result };
}

beforeAll(async () => {
  const issued = await serverCertificate(await certificateAuthority());
  bmc = await startRedfishEmulator({ username: USER, password: PASSWORD, backend, tls: issued });
  const url = new URL(bmc.url);
  bmcFields = {
    driver: 'redfish',
    address: url.hostname,
    port: Number(url.port),
    username: USER,
    password: PASSWORD,
    tlsFingerprint: issued.fingerprint,
  };
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
            commandRoot: commandRoot.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
            commandRootRotations: [],
            trustDomain: TRUST_DOMAIN,
            gateways: [],
            certificates: false,
            ...(gateway.approverSets === undefined ? {} : { approverSets: gateway.approverSets }),
          }),
        );
      }
      if (message.t === 'command.result') results.set(message.id, message);
    });
    socket.send(JSON.stringify({ t: 'ready' }));
  });
  const state = new StateDir(join(scratch, 'state'));
  state.saveIdentity({
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    nodeId: me,
    nodeCredential: 'node_test.credential',
    commandRoot: null,
    role: 'site-agent',
  });
  agent = runAgent({
    state,
    scriptsDir: join(scratch, 'scripts'),
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
  await bmc?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('BMC power off on a site agent without the quorum', () => {
  it('runs an off the metal module sent directly, with no approvals, while no approver set is pinned', async () => {
    backend.power = 'On';
    const ran = await run({ machineId: machine, action: 'off', bmc: bmcFields });
    expect(ran).toMatchObject({ state: 'succeeded', error: null, result: { powerState: 'off' } });
    expect(backend.power).toBe('Off');
    backend.resets.length = 0;
  });
});

describe('BMC power off on a site agent that pins an approver set', () => {
  beforeAll(async () => {
    // The deployment turns the quorum on: the next welcome carries the chain, and the agent pins it.
    gateway.approverSets = [{ set: epoch1, signatures: [] }];
    const before = gateway.welcomes;
    gateway.socket?.close(1001, 'the gateway restarts');
    await until('the daemon to be welcomed again', async () => gateway.welcomes > before, 15_000);
    await until('the approver set to be pinned', async () =>
      logs.some((l) => l.includes('pinned the approver set of epoch 1')),
    );
  }, 120_000);

  it('refuses an off with no approvals, and the BMC is not asked', async () => {
    backend.power = 'On';
    const before = bmc.requests.length;
    const refused = await run({ machineId: machine, action: 'off', bmc: bmcFields });
    expect(refused.state).toBe('failed');
    expect(refused.error).toBe(
      "refused by the node: a metal.bmc command runs only with its batch's approvals, and none came with it",
    );
    expect(bmc.requests.length).toBe(before);
    expect(backend.power).toBe('On');
  });

  it('runs an off two of three approvers signed for this machine, this action and this agent', async () => {
    backend.power = 'On';
    const quorum = batch([leaf(machine, 'off'), leaf(otherMachine, 'reset')], 2);
    const ran = await run({ machineId: machine, action: 'off', bmc: bmcFields }, quorum(0));
    expect(ran).toMatchObject({ state: 'succeeded', error: null, result: { powerState: 'off' } });
    expect(backend.power).toBe('Off');
    expect(backend.resets).toEqual(['ForceOff']);
  });

  it('refuses the same approvals for another machine or another action, before the BMC is asked', async () => {
    backend.power = 'On';
    const quorum = batch([leaf(machine, 'off'), leaf(otherMachine, 'reset')], 2);
    const before = bmc.requests.length;
    for (const payload of [
      { machineId: otherMachine, action: 'off', bmc: bmcFields },
      { machineId: machine, action: 'reset', bmc: bmcFields },
    ]) {
      const refused = await run(payload, quorum(0));
      expect(refused.state).toBe('failed');
      expect(refused.error).toMatch(/^refused by the node: the command is not in batch batch_\w+'s scope/);
    }
    expect(bmc.requests.length).toBe(before);
    expect(backend.power).toBe('On');
    expect(logs.join('\n')).not.toContain(PASSWORD);
  });
});
