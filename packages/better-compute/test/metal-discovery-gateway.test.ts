/**
 * A site agent's reports over a real gateway session: its `pxe.discovered` lands in
 * metal.discovered for its own site; the same report from a node that is not a site agent is
 * refused (answered `pxe.discovered.refused`, nothing recorded) and a malformed one is answered
 * INVALID_ARGUMENT, each without closing the session or a server error; a ramdisk's `metal.report`
 * likewise. And a command queued before a node says hello waits for its welcome, since the daemon
 * checks every command against the command root it pins from the welcome.
 */
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { betterCompute, type ComputeInstance, generatedCommandSigner, serve } from '../src/index.js';

let database: TestDatabase;
let compute: ComputeInstance;
let url = '';
let key = '';
const controller = new AbortController();
let running: Promise<void>;
const logged: string[] = [];

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

const hello = {
  t: 'hello',
  version: '0.1.0',
  capabilities: ['site.agent'],
  inventory: { cpuCores: 1, memoryGiB: 1, gpus: [] },
};

/**
 * A node's session: what it was sent, a wait for a message, and send; after its welcome, unless
 * `sayHello` is false (then the caller sends the hello when it wants, after `ready`).
 */
async function session(credential: string, sayHello = true) {
  const messages: any[] = [];
  const ws = new WebSocket(`${url.replace('http', 'ws')}/api/compute/gateway/session`, {
    headers: { authorization: `Bearer ${credential}` },
  });
  ws.on('message', (data) => {
    const message = JSON.parse(data.toString());
    if (message.t === 'ready' && sayHello) ws.send(JSON.stringify(hello));
    messages.push(message);
  });
  const next = async (match: (m: any) => boolean, ms = 10_000) => {
    for (const end = Date.now() + ms; Date.now() < end;) {
      const seen = messages.find(match);
      if (seen) return seen;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    throw new Error(`no such message came: ${JSON.stringify(messages)}`);
  };
  await next((m) => m.t === (sayHello ? 'welcome' : 'ready'));
  return { ws, messages, next, send: (message: unknown) => ws.send(JSON.stringify(message)) };
}

beforeAll(async () => {
  database = await createTestDatabase();
  compute = await betterCompute(
    { database, secret: 'the discovery gateway test secret', trustedOrigins: [], rateLimit: false },
    { log: () => {} },
  );
  await compute.migrate();
  key = (await compute.embeddedIam!.bootstrapDev())!.rootAdmin.apiKey;
  let listening!: () => void;
  const ready = new Promise<void>((resolve) => (listening = resolve));
  running = serve({
    compute,
    port: 0,
    roles: ['api', 'controllers', 'gateway'],
    signal: controller.signal,
    log: (line) => logged.push(line),
    commandSigner: generatedCommandSigner(),
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

describe('PXE discovery through the gateway', () => {
  it('records a site agent’s report for its site, refuses a plain node’s, answers a malformed one', async () => {
    const site = await call('sites.create', { tenantId: 'root', name: 'pxe-site' });
    const pool = await call('pools.create', { tenantId: 'root', siteId: site.id, name: 'pxe-pool' });
    const agentToken = (
      await call('siteTokens.create', { tenantId: 'root', poolId: pool.id, preApproved: true })
    ).token;
    const plainToken = (
      await call('joinTokens.create', { tenantId: 'root', poolId: pool.id, uses: 1, preApproved: true })
    ).token;
    const inventory = { cpuCores: 1, memoryGiB: 1, gpus: [] };
    const agent = await call('nodes.join', { joinToken: agentToken, hostname: 'site-agent', inventory });
    const plain = await call('nodes.join', { joinToken: plainToken, hostname: 'worker', inventory });
    const agentSession = await session(agent.nodeCredential);
    const plainSession = await session(plain.nodeCredential);
    try {
      agentSession.send({
        t: 'pxe.discovered',
        mac: '52:54:00:C0:FF:EE',
        uuid: '4C4C4544-0042-3510-8052-B4C04F4A4E31',
      });
      plainSession.send({ t: 'pxe.discovered', mac: '52:54:00:00:0B:AD' });
      const refused = await plainSession.next((m) => m.t === 'pxe.discovered.refused');
      expect(refused).toEqual({
        t: 'pxe.discovered.refused',
        mac: '52:54:00:00:0B:AD',
        message: 'the node is not a site agent',
      });
      expect(logged.some((line) => line.includes(`from ${plain.nodeId} was refused`))).toBe(true);
      // A field the protocol does not know (a site to speak for) makes the message unknown.
      agentSession.send({ t: 'pxe.discovered', mac: '52:54:00:00:00:02', siteId: 'site_other' });
      agentSession.send({ t: 'pxe.discovered', mac: 'x'.repeat(5000) });
      await agentSession.next(
        (m) =>
          m.t === 'error' &&
          m.code === 'INVALID_ARGUMENT' &&
          agentSession.messages.filter((x) => x.t === 'error').length === 2,
      );
      let listed: any = null;
      for (let i = 0; i < 100 && !listed?.items.length; i++) {
        listed = await call('metal.discovered', { tenantId: 'root', siteId: site.id });
        if (!listed.items.length) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(listed.items).toMatchObject([
        {
          mac: '52:54:00:c0:ff:ee',
          uuid: '4c4c4544-0042-3510-8052-b4c04f4a4e31',
          kind: 'unknown',
          timesSeen: 1,
        },
      ]);
      const { rows } = await sql`select mac from compute.metal_pxe_discoveries`.execute(database.db as never);
      expect(rows).toEqual([{ mac: '52:54:00:c0:ff:ee' }]);
      // Both sessions are still open.
      expect([agentSession.ws.readyState, plainSession.ws.readyState]).toEqual([
        WebSocket.OPEN,
        WebSocket.OPEN,
      ]);
    } finally {
      agentSession.ws.close();
      plainSession.ws.close();
    }
  });

  it('a ramdisk’s report relayed by a site agent: refused from a plain node, for an unknown MAC, or malformed', async () => {
    const site = await call('sites.create', { tenantId: 'root', name: 'inspect-site' });
    const pool = await call('pools.create', { tenantId: 'root', siteId: site.id, name: 'inspect-pool' });
    const inventory = { cpuCores: 1, memoryGiB: 1, gpus: [] };
    const agentToken = (
      await call('siteTokens.create', { tenantId: 'root', poolId: pool.id, preApproved: true })
    ).token;
    const plainToken = (
      await call('joinTokens.create', { tenantId: 'root', poolId: pool.id, uses: 1, preApproved: true })
    ).token;
    const agent = await call('nodes.join', { joinToken: agentToken, hostname: 'agent-2', inventory });
    const plain = await call('nodes.join', { joinToken: plainToken, hostname: 'worker-2', inventory });
    const agentSession = await session(agent.nodeCredential);
    const plainSession = await session(plain.nodeCredential);
    const report = {
      t: 'metal.report',
      mac: '52:54:00:12:34:56',
      purpose: 'inspect',
      inventory: {
        systemUuid: null,
        cpu: { count: 2, model: 'QEMU' },
        memory: { physicalMiB: 512, totalKiB: 468156 },
        disks: [],
        nics: [{ name: 'eth0', mac: '52:54:00:12:34:56' }],
      },
    };
    try {
      plainSession.send(report);
      expect(await plainSession.next((m) => m.t === 'metal.report.refused')).toEqual({
        t: 'metal.report.refused',
        mac: report.mac,
        message: 'the node is not a site agent',
      });
      agentSession.send(report);
      expect(await agentSession.next((m) => m.t === 'metal.report.refused')).toEqual({
        t: 'metal.report.refused',
        mac: report.mac,
        message: 'no machine of the agent’s site has the MAC 52:54:00:12:34:56',
      });
      // An inventory the schema refuses (a disk name with a path in it, too many CPUs) is not a report.
      agentSession.send({
        ...report,
        inventory: {
          ...report.inventory,
          disks: [{ name: '../sda', sizeBytes: 1, model: '', serial: '', rotational: false }],
        },
      });
      agentSession.send({ ...report, inventory: { ...report.inventory, cpu: { count: 1e9, model: '' } } });
      // A NUL or another control character in a reported name (PostgreSQL's jsonb would refuse a NUL).
      agentSession.send({
        ...report,
        inventory: { ...report.inventory, cpu: { count: 2, model: 'a\u0000b' } },
      });
      await agentSession.next(
        (m) =>
          m.t === 'error' &&
          m.code === 'INVALID_ARGUMENT' &&
          agentSession.messages.filter((x) => x.t === 'error').length === 3,
      );
      expect(agentSession.ws.readyState).toBe(WebSocket.OPEN);
      // A cleaning's report goes the same way; one whose findings are not its purpose's is refused.
      const { inventory: _inventory, ...bare } = report;
      const cleaning = { systemUuid: null, disks: [], failed: null };
      agentSession.send({ ...bare, purpose: 'clean', cleaning });
      expect(
        await agentSession.next((m) => m.t === 'metal.report.refused' && m.message.includes('MAC')),
      ).toEqual({
        t: 'metal.report.refused',
        mac: report.mac,
        message: 'no machine of the agent’s site has the MAC 52:54:00:12:34:56',
      });
      agentSession.send({ ...report, purpose: 'clean' });
      expect(
        await agentSession.next((m) => m.t === 'metal.report.refused' && m.message.includes('carries')),
      ).toEqual({
        t: 'metal.report.refused',
        mac: report.mac,
        message: 'a clean report carries a cleaning and nothing else',
      });
      agentSession.send({ ...bare, purpose: 'clean', cleaning: { ...cleaning, failed: 'bad\u0000write' } });
      await agentSession.next(
        (m) =>
          m.t === 'error' &&
          m.code === 'INVALID_ARGUMENT' &&
          agentSession.messages.filter((x) => x.t === 'error').length === 4,
      );
      expect(agentSession.ws.readyState).toBe(WebSocket.OPEN);
    } finally {
      agentSession.ws.close();
      plainSession.ws.close();
    }
  });

  it('a command queued before a node’s hello is sent only after its welcome, which pins the command root', async () => {
    const site = await call('sites.create', { tenantId: 'root', name: 'welcome-site' });
    const pool = await call('pools.create', { tenantId: 'root', siteId: site.id, name: 'welcome-pool' });
    const token = (await call('siteTokens.create', { tenantId: 'root', poolId: pool.id, preApproved: true }))
      .token;
    const agent = await call('nodes.join', {
      joinToken: token,
      hostname: 'agent-3',
      inventory: { cpuCores: 1, memoryGiB: 1, gpus: [] },
    });
    await call('nodes.heartbeat', { nodeCredential: agent.nodeCredential });
    const machine = await call('metal.enroll', {
      tenantId: 'root',
      siteId: site.id,
      name: 'welcome-1',
      bmcDriver: 'ipmi',
      bmcAddress: '10.0.0.9',
      bmcUser: 'admin',
      bmcPassword: 'welcome-bmc-password',
      productUuid: '4c4c4544-0042-3510-8052-b4c04f4a4e39',
    });
    await call('metal.manage', { tenantId: 'root', machineId: machine.id });
    // The workflow's first step queues its metal.bmc for the agent (the controllers run here).
    for (let i = 0; i < 200; i++) {
      const { rows } = await sql`select id from compute.commands where node_id = ${agent.nodeId}`.execute(
        database.db as never,
      );
      if (rows.length > 0) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    // Connected, not yet said hello: several delivery passes go by, and nothing is sent.
    const early = await session(agent.nodeCredential, false);
    try {
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(early.messages.map((m) => m.t)).toEqual(['ready']);
      early.send(hello);
      await early.next((m) => m.t === 'command');
      const order = early.messages.map((m) => m.t);
      expect(order.indexOf('welcome')).toBeGreaterThan(-1);
      expect(order.indexOf('welcome')).toBeLessThan(order.indexOf('command'));
    } finally {
      early.ws.close();
    }
  });
});
