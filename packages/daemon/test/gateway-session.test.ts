/**
 * The session endpoint as an attacker meets it: no credential, a malformed or unknown one, a
 * forged node id, garbage frames, NUL bytes, a frame past the limit, and a result for another
 * node's command. None gets a 5xx, a session, or a change to another node's rows.
 */
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  betterCompute,
  type ComputeInstance,
  generatedCommandSigner,
  serve,
} from '../../better-compute/src/index.js';
import { until } from './daemon-support.js';

let database: TestDatabase;
let compute: ComputeInstance;
let url = '';
const controller = new AbortController();
let running: Promise<void>;
let credentials: { nodeId: string; credential: string }[] = [];

async function call<T = any>(method: string, body: Record<string, unknown>, key?: string): Promise<T> {
  const response = await fetch(`${url}/api/compute/${method.replaceAll('.', '/')}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify(body),
  });
  const answer = (await response.json()) as { data?: T; error?: { code: string } };
  if (answer.error) throw new Error(answer.error.code);
  return answer.data as T;
}

/** Opens a session; resolves with the first message, or how it was refused or closed. */
function open(
  headers: Record<string, string>,
  first?: (ws: WebSocket) => void,
): Promise<{ status?: number; close?: number; message?: any; ws?: WebSocket }> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`${url.replace('http', 'ws')}/api/compute/gateway/session`, { headers });
    ws.on('unexpected-response', (_request, response) => resolve({ status: response.statusCode }));
    ws.on('error', () => undefined);
    ws.on('close', (code) => resolve({ close: code }));
    ws.on('message', (data) => {
      const message = JSON.parse(data.toString());
      if (message.t === 'ready' && first) return first(ws);
      resolve({ message, ws });
    });
  });
}

beforeAll(async () => {
  database = await createTestDatabase('postgres');
  compute = await betterCompute({ database, trustedOrigins: [], rateLimit: false }, { log: () => {} });
  await compute.migrate();
  const key = (await compute.embeddedIam!.bootstrapDev())!.rootAdmin.apiKey;
  running = serve({
    compute,
    port: 0,
    roles: ['api', 'gateway'],
    signal: controller.signal,
    log: () => {},
    commandSigner: generatedCommandSigner(),
    onListening: (u) => (url = u),
  });
  await until('serve', async () => url);
  const site = await call('sites.create', { tenantId: 'root', name: 's' }, key);
  const pool = await call('pools.create', { tenantId: 'root', siteId: site.id, name: 'p' }, key);
  const { token } = await call(
    'joinTokens.create',
    { tenantId: 'root', poolId: pool.id, uses: 2, preApproved: true },
    key,
  );
  for (const hostname of ['a', 'b']) {
    const joined = await call('nodes.join', {
      joinToken: token,
      hostname,
      inventory: { cpuCores: 1, memoryGiB: 1, gpus: [] },
    });
    credentials.push({ nodeId: joined.nodeId, credential: joined.nodeCredential });
  }
}, 120_000);

afterAll(async () => {
  controller.abort();
  await running;
  await database?.close();
});

describe('the gateway session endpoint', () => {
  it('refuses a missing, malformed or unknown credential before any session', async () => {
    expect(await open({})).toEqual({ status: 401 });
    expect(await open({ authorization: 'Bearer biam_key_not_a_node' })).toEqual({ status: 401 });
    const [a] = credentials;
    const forged = `${a!.credential.split('.')[0]}.${'A'.repeat(43)}`;
    expect(await open({ authorization: `Bearer ${forged}` })).toEqual({ close: 4401 });
    expect(await open({ authorization: `Bearer node_${'x'.repeat(200)}.${'y'.repeat(40)}` })).toEqual({
      close: 4401,
    });
  });

  it('answers garbage, NUL bytes and unknown messages with an error, and closes a frame past the limit', async () => {
    const [a] = credentials;
    const hello = await open({ authorization: `Bearer ${a!.credential}` }, (ws) =>
      ws.send('{"t":"nonsense"}'),
    );
    expect(hello.message).toMatchObject({ t: 'error', code: 'INVALID_ARGUMENT' });
    const ws = hello.ws!;
    const replies: any[] = [];
    ws.on('message', (data) => replies.push(JSON.parse(data.toString())));
    ws.send('not json\u0000');
    ws.send(
      JSON.stringify({
        t: 'hello',
        version: 'x\u0000',
        capabilities: [],
        inventory: { cpuCores: 1, memoryGiB: 1, gpus: [] },
      }),
    );
    await until('two errors', async () => replies.filter((r) => r.t === 'error').length >= 2);
    const closed = new Promise<number>((resolve) => ws.on('close', resolve));
    ws.send('x'.repeat((1 << 20) + 1));
    expect(await closed).toBe(1009);
  });

  it('a node cannot report on another node’s command', async () => {
    const [a, b] = credentials;
    const db = compute.database.db;
    await sql`insert into compute.commands (id, tenant_id, node_id, kind, payload, state, created_at, expires_at)
      values ('cmd_forB', 'root', ${b!.nodeId}, 'inventory.refresh', '{}', 'running', now(), now() + interval '1 hour')`.execute(
      db,
    );
    const session = await open({ authorization: `Bearer ${a!.credential}` }, (ws) =>
      ws.send(
        JSON.stringify({
          t: 'hello',
          version: '0.1.0',
          capabilities: [],
          inventory: { cpuCores: 1, memoryGiB: 1, gpus: [] },
        }),
      ),
    );
    expect(session.message).toMatchObject({ t: 'welcome', nodeId: a!.nodeId });
    session.ws!.send(
      JSON.stringify({
        t: 'command.result',
        id: 'cmd_forB',
        state: 'succeeded',
        exitCode: 0,
        stdout: 'pwned',
        stderr: '',
        result: null,
        error: null,
      }),
    );
    await until('the ack', async () => true);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const { rows } = await sql<any>`select state, stdout from compute.commands where id = 'cmd_forB'`.execute(
      db,
    );
    expect(rows[0]).toEqual({ state: 'running', stdout: '' });
    session.ws!.close();
  });
});
