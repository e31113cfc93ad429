/**
 * A site agent's PXE discovery over a real gateway session: its `pxe.discovered` lands in
 * metal.discovered for its own site; the same report from a node that is not a site agent is
 * refused (answered `pxe.discovered.refused`, nothing recorded) and a malformed one is answered
 * INVALID_ARGUMENT, each without closing the session or a server error.
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

/** A node's session after its welcome: what it was sent, a wait for a message, and send. */
async function session(credential: string) {
  const messages: any[] = [];
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
          capabilities: ['site.agent'],
          inventory: { cpuCores: 1, memoryGiB: 1, gpus: [] },
        }),
      );
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
  await next((m) => m.t === 'welcome');
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
    roles: ['api', 'gateway'],
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
});
