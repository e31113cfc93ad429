/**
 * The gateway's side of the quorum, over a real session: `welcome` carries the bundle's approver
 * chain (`approverSets`), a batch's member reaches the node only once the batch is approved, and
 * then with its batch statement, leaf proof and approvals (`quorum`), which the daemon's own check
 * accepts under the pinned set; a command of no batch is sent exactly as before, without one.
 */
import { createPrivateKey, createPublicKey, verify } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { envelopeBytes } from '@better-compute/core';
import {
  type ApproverChainEntry,
  type ApproverSet,
  checkCommandQuorum,
  encodePublicKey,
  followApproverChain,
  fromHex,
  generateApproverKey,
  signApproval,
} from '@better-compute/core/quorum';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { betterCompute, type ComputeInstance, generatedCommandSigner, serve } from '../src/index.js';
import { createPkiBundle } from '../src/pki/create.js';

const secret = 'the batch gateway test secret';
const dir = mkdtempSync(join(tmpdir(), 'bc-batch-gw-'));
const path = join(dir, 'pki.json');
const keys = [generateApproverKey(), generateApproverKey()].map((files) => {
  const privateKey = createPrivateKey(files.privatePem);
  return { kid: files.kid, privateKey, publicKey: encodePublicKey(createPublicKey(privateKey)) };
});
const signer = generatedCommandSigner();
let chain: ApproverChainEntry[] = [];
let set: ApproverSet;
let database: TestDatabase;
let compute: ComputeInstance;
let url = '';
let key = '';
const controller = new AbortController();
let running: Promise<void>;

async function call<T = any>(method: string, body: Record<string, unknown>): Promise<T> {
  const response = await fetch(`${url}/api/compute/${method.replaceAll('.', '/')}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
  const answer = (await response.json()) as { data?: T; error?: { code: string; message: string } };
  if (answer.error) throw new Error(`${answer.error.code}: ${answer.error.message}`);
  return answer.data as T;
}

/** A node's session: every message it was sent, and a wait for the next one that matches. */
function session(credential: string) {
  const messages: any[] = [];
  const waiters: { match: (m: any) => boolean; resolve: (m: any) => void }[] = [];
  const ws = new WebSocket(`${url.replace('http', 'ws')}/api/compute/gateway/session`, {
    headers: { authorization: `Bearer ${credential}` },
  });
  ws.on('message', (data) => {
    const message = JSON.parse(data.toString());
    if (message.t === 'ready')
      ws.send(
        JSON.stringify({
          t: 'hello',
          version: '0.1.0',
          capabilities: [],
          inventory: { cpuCores: 1, memoryGiB: 1, gpus: [] },
        }),
      );
    messages.push(message);
    for (const waiter of [...waiters])
      if (waiter.match(message)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(message);
      }
  });
  return {
    messages,
    next(match: (m: any) => boolean, ms = 10_000): Promise<any> {
      const seen = messages.find(match);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no such message came')), ms);
        waiters.push({ match, resolve: (m) => (clearTimeout(timer), resolve(m)) });
      });
    },
    close: () => ws.close(),
  };
}

beforeAll(async () => {
  const bundle = await createPkiBundle({ path, secret, trustDomain: 'compute.example.com' });
  set = {
    trustDomain: bundle.trustDomain,
    epoch: 1,
    threshold: 2,
    approvers: keys
      .map(({ kid, publicKey }) => ({ kid, publicKey }))
      .sort((a, b) => (a.kid < b.kid ? -1 : 1)),
  };
  chain = [{ set, signatures: [] }];
  const document = JSON.parse(readFileSync(path, 'utf8'));
  writeFileSync(path, JSON.stringify({ ...document, approvers: chain }), { mode: 0o600 });
  database = await createTestDatabase();
  compute = await betterCompute(
    { database, pki: path, secret, trustedOrigins: [], rateLimit: false },
    { log: () => {} },
  );
  await compute.migrate();
  key = (await compute.embeddedIam!.bootstrapDev())!.rootAdmin.apiKey;
  let listening!: () => void;
  const ready = new Promise<void>((resolve) => (listening = resolve));
  running = serve({
    compute,
    port: 0,
    roles: ['api', 'gateway'],
    signal: controller.signal,
    log: () => {},
    commandSigner: signer,
    onListening: (u) => {
      url = u;
      listening();
    },
  });
  await ready;
}, 120_000);

afterAll(async () => {
  controller.abort();
  await running;
  await database?.close();
});

describe('the gateway and the quorum', () => {
  it('welcomes with the approver chain and sends a batch member only once approved, with its quorum', async () => {
    const site = await call('sites.create', { tenantId: 'root', name: 'gw-site' });
    const pool = await call('pools.create', { tenantId: 'root', siteId: site.id, name: 'gw-pool' });
    const { token } = await call('joinTokens.create', {
      tenantId: 'root',
      poolId: pool.id,
      uses: 1,
      preApproved: true,
    });
    const joined = await call('nodes.join', {
      joinToken: token,
      hostname: 'gw-1',
      inventory: { cpuCores: 1, memoryGiB: 1, gpus: [] },
    });
    const node = session(joined.nodeCredential);
    try {
      const welcome = await node.next((m) => m.t === 'welcome');
      expect(welcome.approverSets).toEqual(chain);
      expect(welcome.commandRoot).toBe(signer.publicKeyPem);
      const pinned = followApproverChain(null, welcome.approverSets);
      expect(pinned).toMatchObject({ ok: true, set: { epoch: 1, threshold: 2 } });

      const batch = await call('commandBatches.create', {
        tenantId: 'root',
        reason: 'power-cycle gw-1 after the firmware recall',
        leaves: [
          { subject: joined.nodeId, kind: 'metal.power', payload: { action: 'cycle' } },
          { subject: joined.nodeId, kind: 'metal.power', payload: null, runWith: { action: 'reset' } },
        ],
      });
      const statement = {
        batchId: batch.id,
        trustDomain: batch.trustDomain,
        root: fromHex(batch.root, 32)!,
        size: batch.size,
        notAfter: Date.parse(batch.notAfter),
      };
      const [first, second] = keys.map((k) => ({
        batchId: batch.id,
        ...signApproval(k.privateKey, statement),
      }));
      await call('commandBatches.approve', { tenantId: 'root', ...first });
      // A plain command queued after the first approval arrives; the held member does not.
      const plain = await call('commands.run', {
        tenantId: 'root',
        nodeId: joined.nodeId,
        kind: 'inventory.refresh',
      });
      const plainMessage = await node.next((m) => m.t === 'command' && m.command.id === plain.id);
      expect(Object.keys(plainMessage).sort()).toEqual(['command', 'signature', 't']);
      expect(node.messages.filter((m) => m.t === 'command' && m.command.kind === 'metal.power')).toEqual([]);

      await call('commandBatches.approve', { tenantId: 'root', ...second });
      const member = await node.next((m) => m.t === 'command' && m.command.kind === 'metal.power');
      const unbound = await node.next((m) => m.t === 'command' && m.command.payload.action === 'reset');
      expect(member.command).toMatchObject({
        nodeId: joined.nodeId,
        kind: 'metal.power',
        payload: { action: 'cycle' },
      });
      expect(
        verify(
          null,
          envelopeBytes(member.command),
          createPublicKey(signer.publicKeyPem),
          Buffer.from(member.signature, 'base64'),
        ),
      ).toBe(true);
      expect(member.quorum).toEqual({
        batch: {
          batchId: batch.id,
          trustDomain: 'compute.example.com',
          root: batch.root,
          size: 2,
          notAfter: batch.notAfter,
        },
        index: 0,
        proof: [expect.stringMatching(/^[0-9a-f]{64}$/)],
        unbound: false,
        approvals: [
          { kid: first!.kid, signature: first!.signature },
          { kid: second!.kid, signature: second!.signature },
        ],
      });
      // What the daemon runs: the pinned set's check of the command it was sent.
      expect(checkCommandQuorum(set, member.command, member.quorum, Date.now()).refusal).toBeNull();
      expect(unbound.quorum).toMatchObject({ index: 1, unbound: true });
      expect(checkCommandQuorum(set, unbound.command, unbound.quorum, Date.now()).refusal).toBeNull();
      // The same attachment proves nothing for another operation on the machine.
      const other = { ...member.command, payload: { action: 'off' } };
      expect(checkCommandQuorum(set, other, member.quorum, Date.now()).refusal).toContain('not in batch');
      expect(checkCommandQuorum(set, member.command, undefined, Date.now()).refusal).toContain(
        'none came with it',
      );
    } finally {
      node.close();
    }
  });
});
