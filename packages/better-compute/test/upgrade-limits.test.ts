/**
 * Per-address limits on the upgrade routes (issue 39 item 2), on the real node server with the node
 * routes attached: tunnel upgrades with refused credentials or tickets from one address are
 * answered 429 with Retry-After once its refused credentials are used up, and a node session
 * opened with a guessed node credential is closed 4429 then; another address is not affected.
 */
import type { Server } from 'node:http';
import { createTestDatabase, type TestDatabase, testDatabaseKinds } from '@better-compute/db/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { createNodeServer } from '../src/host/node-adapter.js';
import { attachNodeRoutes, type NodeRoutes } from '../src/host/node-routes.js';
import { closeServer, listen } from '../src/host/serve.js';

const [kind] = await testDatabaseKinds();

let database: TestDatabase;
let compute: ComputeInstance;
let server: Server;
let routes: NodeRoutes;
let url = '';

beforeAll(async () => {
  database = await createTestDatabase(kind!);
  compute = await betterCompute(
    {
      database,
      // Requests come from 127.0.0.1, a trusted proxy here, so X-Forwarded-For names the client.
      rateLimit: { trustedProxies: ['127.0.0.1'], addressFailures: { perSecond: 0.001, burst: 3 } },
    },
    { log: () => {} },
  );
  await compute.migrate();
  server = createNodeServer(compute);
  url = await listen(server, 0, '127.0.0.1');
  routes = await attachNodeRoutes(server, { compute, api: true, gateway: { url }, log: () => {} });
}, 120_000);

afterAll(async () => {
  await routes?.close();
  await closeServer(server);
  await compute.close();
  await database.close();
});

/** An upgrade's outcome: the HTTP refusal, or the close code of a socket that opened. */
function upgrade(
  path: string,
  headers: Record<string, string>,
): Promise<{ status?: number; retryAfter?: string | undefined; body?: any; closeCode?: number }> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`${url.replace('http', 'ws')}${path}`, { headers });
    ws.on('unexpected-response', (_request, response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => (text += chunk.toString()));
      response.on('end', () => {
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // An empty refusal.
        }
        resolve({ status: response.statusCode, retryAfter: response.headers['retry-after'], body });
      });
    });
    ws.on('close', (code) => resolve({ closeCode: code }));
    ws.on('error', () => {});
  });
}

describe('per-address limits on upgrades', () => {
  it('refuses tunnel upgrades from an address whose refused credentials are used up', async () => {
    const from = (address: string) => ({
      authorization: 'Bearer biam_key_guessed0123456789',
      'x-forwarded-for': address,
    });
    const answers = [];
    for (let i = 0; i < 3; i++)
      answers.push(await upgrade('/api/compute/tunnels/ticket.guessed', from('203.0.113.7')));
    expect(answers.map((a) => a.status)).toEqual([401, 401, 401]);
    const refused = await upgrade('/api/compute/tunnels/ticket.guessed', from('203.0.113.7'));
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatchObject({
      code: 'RATE_LIMITED',
      details: { limit: 'address-failures', retryAfterMs: expect.any(Number) },
    });
    expect(Number(refused.retryAfter)).toBeGreaterThan(0);
    // A malformed ticket counts too, and another address is answered on its merits.
    expect((await upgrade('/api/compute/tunnels/%00', from('203.0.113.8'))).status).toBe(401);
    expect((await upgrade('/api/compute/tunnels/ticket.guessed', from('203.0.113.9'))).status).toBe(401);
  }, 120_000);

  it('closes node sessions opened with a guessed credential from one address with 4429', async () => {
    const from = (address: string) => ({
      authorization: 'Bearer node_guessed0123.0123456789abcdef',
      'x-forwarded-for': address,
    });
    const codes = [];
    for (let i = 0; i < 4; i++)
      codes.push((await upgrade('/api/compute/gateway/session', from('203.0.113.20'))).closeCode);
    expect(codes).toEqual([4401, 4401, 4401, 4429]);
    expect((await upgrade('/api/compute/gateway/session', from('203.0.113.21'))).closeCode).toBe(4401);
  }, 120_000);
});
