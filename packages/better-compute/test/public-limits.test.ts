/**
 * Per-address limits on the public routes (issue 39 item 2), through the real node server, the
 * real embedded Better IAM and a real database: password spraying from one address is refused
 * before it costs a password hash each, and so are guessed join tokens, claim secrets and node
 * credentials; another address is not affected; X-Forwarded-For names the client only when the
 * peer is a trusted proxy; bad headers never give a 5xx.
 */
import type { Server } from 'node:http';
import { createTestDatabase, type TestDatabase, testDatabaseKinds } from '@better-compute/db/testing';
import { newId } from '@better-compute/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute, type ComputeConfig, type ComputeInstance } from '../src/index.js';
import { createNodeServer } from '../src/host/node-adapter.js';
import { closeServer, listen } from '../src/host/serve.js';
import { nodeInventory } from './fleet-support.js';

const [kind] = await testDatabaseKinds();

// A refill this slow adds nothing while a test runs: what is allowed is the burst alone.
const SLOW = 0.001;

interface Served {
  database: TestDatabase;
  compute: ComputeInstance;
  server: Server;
  url: string;
  member: { email: string; password: string; tenantId: string; apiKey: string };
  close(): Promise<void>;
}

async function served(rateLimit: ComputeConfig['rateLimit']): Promise<Served> {
  const database = await createTestDatabase(kind!);
  const compute = await betterCompute({ database, rateLimit }, { log: () => {} });
  await compute.migrate();
  const dev = (await compute.embeddedIam!.bootstrapDev())!;
  const server = createNodeServer(compute);
  const url = await listen(server, 0, '127.0.0.1');
  return {
    database,
    compute,
    server,
    url,
    member: dev.acmeMember,
    async close() {
      await closeServer(server);
      await compute.close();
      await database.close();
    },
  };
}

interface Answer {
  status: number;
  retryAfter: string | null;
  error?: { code: string; message: string; hint?: string; details?: Record<string, any> };
  data?: any;
}

async function post(url: string, path: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  let parsed: object = {};
  try {
    parsed = JSON.parse(text) as object;
  } catch {
    parsed = { error: { code: 'NOT_JSON', message: text } };
  }
  return { status: response.status, retryAfter: response.headers.get('retry-after'), ...parsed } as Answer;
}

const signIn = (d: Served, email: string, password: string, headers?: Record<string, string>) =>
  post(d.url, '/api/iam/sessions/signIn', { email, password, tenantId: 'acme' }, headers);
const join = (d: Served, headers?: Record<string, string>) =>
  post(
    d.url,
    '/api/compute/nodes/join',
    { joinToken: 'jt_guessed_0123456789abcdef', hostname: 'gpu-1', inventory: nodeInventory() },
    headers,
  );
const heartbeat = (d: Served, headers?: Record<string, string>) =>
  post(d.url, '/api/compute/nodes/heartbeat', { nodeCredential: 'node_guessed.0123456789abcdef' }, headers);
const claim = (d: Served, headers?: Record<string, string>) =>
  post(
    d.url,
    '/api/compute/nodes/claim',
    { joinRequestId: newId('joinRequest'), claimSecret: 'guessed-claim-secret-0123456789' },
    headers,
  );

/** The first answer of `answers` that is not the refused credential, with how many came before it. */
function firstLimited(answers: Answer[]) {
  const index = answers.findIndex((a) => a.status !== 401);
  return { index, answer: answers[index] };
}

describe('per-address limits on public routes', () => {
  describe('behind a trusted proxy', () => {
    let d: Served;
    beforeAll(async () => {
      // The test's requests come from 127.0.0.1, here a trusted proxy: X-Forwarded-For names the
      // client, so the test can speak from several addresses. The default burst of refused
      // credentials (20), refilled too slowly to matter while the test runs.
      d = await served({ trustedProxies: ['127.0.0.1'], addressFailures: { perSecond: SLOW } });
    }, 120_000);
    afterAll(() => d?.close());

    it('refuses password spraying from one address well before 300 accounts, and not another address', async () => {
      const attacker = { 'x-forwarded-for': '203.0.113.7' };
      const answers: Answer[] = [];
      for (let i = 0; i < 300; i++)
        answers.push(await signIn(d, `victim-${i}@acme.example`, 'Winter2025!', attacker));
      const { index, answer } = firstLimited(answers);
      // 20 refused credentials, then none until one refills.
      expect(index).toBe(20);
      expect(answer!.status).toBe(429);
      expect(answer!.error).toMatchObject({
        code: 'RATE_LIMITED',
        details: { limit: 'address-failures', retryAfterMs: expect.any(Number) },
      });
      expect(answer!.error!.hint).toMatch(/per client address/);
      expect(answer!.retryAfter).toBe(String(Math.ceil(answer!.error!.details!.retryAfterMs / 1000)));
      // Every later attempt is refused before its password is checked.
      expect(answers.slice(20).every((a) => a.status === 429)).toBe(true);
      // Even the right password, from that address; from another, the member signs in.
      expect((await signIn(d, d.member.email, d.member.password, attacker)).status).toBe(429);
      const other = await signIn(d, d.member.email, d.member.password, { 'x-forwarded-for': '198.51.100.9' });
      expect(other.status).toBe(200);
      expect(other.data?.principal?.email).toBe(d.member.email);
    }, 120_000);

    it('refuses guessed join tokens, node credentials and claim secrets from one address', async () => {
      for (const [attempt, address] of [
        [join, '203.0.113.21'],
        [heartbeat, '203.0.113.22'],
        [claim, '203.0.113.23'],
      ] as const) {
        const answers: Answer[] = [];
        for (let i = 0; i < 600; i++) {
          const answer = await attempt(d, { 'x-forwarded-for': address });
          answers.push(answer);
          if (answer.status === 429) break;
        }
        const { index, answer } = firstLimited(answers);
        expect(answers.slice(0, index).every((a) => a.error?.code === 'UNAUTHENTICATED')).toBe(true);
        expect(index).toBe(20);
        expect(answer).toMatchObject({
          status: 429,
          error: { code: 'RATE_LIMITED', details: { limit: 'address-failures' } },
        });
        expect(Number(answer!.retryAfter)).toBeGreaterThan(0);
        // Another address still gets its answer.
        expect((await attempt(d, { 'x-forwarded-for': '198.51.100.30' })).status).toBe(401);
      }
    }, 120_000);

    it('takes the rightmost address a trusted proxy did not write, and ignores what the client wrote left of it', async () => {
      const client = '203.0.113.40';
      for (let i = 0; i < 20; i++)
        // Each request claims another origin left of the proxy's entry; the client is still one.
        expect((await heartbeat(d, { 'x-forwarded-for': `192.0.2.${i}, ${client}` })).status).toBe(401);
      expect((await heartbeat(d, { 'x-forwarded-for': `192.0.2.99, ${client}` })).status).toBe(429);
      // Another client behind the same proxy has its own count.
      expect((await heartbeat(d, { 'x-forwarded-for': '203.0.113.41' })).status).toBe(401);
    }, 120_000);

    it('answers malformed X-Forwarded-For without a 5xx', async () => {
      for (const value of [
        'not-an-address',
        ', ,',
        '[::1',
        '1.2.3.4.5',
        'x'.repeat(6000),
        '::ffff:',
        '999.1.1.1',
      ]) {
        const answer = await heartbeat(d, { 'x-forwarded-for': value });
        expect(answer.status, value.slice(0, 40)).toBe(401);
      }
      // A request that carries no address at all through a proxy is its proxy's: still answered.
      expect((await post(d.url, '/api/compute/system/version', {})).status).toBe(200);
    }, 120_000);

    it('counts no sign-in that worked against its address', async () => {
      const from = { 'x-forwarded-for': '203.0.113.50' };
      for (let i = 0; i < 25; i++)
        expect((await signIn(d, d.member.email, d.member.password, from)).status).toBe(200);
    }, 120_000);
  });

  describe('without a trusted proxy', () => {
    let d: Served;
    beforeAll(async () => {
      d = await served({
        addressFailures: { perSecond: SLOW, burst: 5 },
        address: { perSecond: SLOW, burst: 40 },
      });
    }, 120_000);
    afterAll(() => d?.close());

    it('ignores X-Forwarded-For: a client naming a new address each time is still one address', async () => {
      const answers: Answer[] = [];
      for (let i = 0; i < 10; i++) answers.push(await heartbeat(d, { 'x-forwarded-for': `198.51.100.${i}` }));
      expect(firstLimited(answers).index).toBe(5);
      expect(answers[5]!.error?.details?.limit).toBe('address-failures');
    }, 120_000);

    it("limits an address's public calls, refused or not, by their cost", async () => {
      // Through the handler a host calls with the address it found: system.version is a read, half
      // a token of the burst of 40.
      const statuses: number[] = [];
      for (let i = 0; i < 90; i++) {
        const response = await d.compute.handler(
          new Request('http://localhost/api/compute/system/version', { method: 'POST', body: '{}' }),
          { clientAddress: '203.0.113.70' },
        );
        statuses.push(response.status);
        if (response.status === 429) {
          const body = (await response.json()) as Answer;
          expect(body.error).toMatchObject({ code: 'RATE_LIMITED', details: { limit: 'address' } });
          expect(body.error!.message).toMatch(/from this address/);
          expect(response.headers.get('retry-after')).not.toBeNull();
        } else await response.body?.cancel();
      }
      expect(statuses.indexOf(429)).toBe(80);
    }, 120_000);

    it('leaves calls with a credential to their identity’s budget, whatever their address did', async () => {
      // 127.0.0.1 has used up its refused credentials above; the member's key still works from it.
      expect((await post(d.url, '/api/compute/system/version', {})).status).toBe(429);
      const whoami = await post(
        d.url,
        '/api/compute/system/whoami',
        {},
        { authorization: `Bearer ${d.member.apiKey}` },
      );
      expect(whoami.status).toBe(200);
    }, 120_000);
  });

  it('has no per-address limit in process, where there is no address', async () => {
    const d = await served({ addressFailures: { perSecond: SLOW, burst: 2 } });
    try {
      for (let i = 0; i < 10; i++) {
        const response = await d.compute.handler(
          new Request('http://localhost/api/compute/nodes/heartbeat', {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ nodeCredential: 'node_guessed.0123456789abcdef' }),
          }),
        );
        expect(response.status).toBe(401);
      }
      // A host that knows the address passes it, and is limited by it.
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) {
        const response = await d.compute.handler(
          new Request('http://localhost/api/compute/nodes/heartbeat', {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ nodeCredential: 'node_guessed.0123456789abcdef' }),
          }),
          { clientAddress: '203.0.113.60' },
        );
        statuses.push(response.status);
      }
      expect(statuses).toEqual([401, 401, 429]);
    } finally {
      await d.close();
    }
  }, 120_000);

  it('refuses a trusted proxy that is no address or range when the server is made', async () => {
    const d = await served(false);
    try {
      for (const trustedProxies of [['10.0.0.0/33'], ['not-a-proxy'], ['10.0.0.0/8/1'], ['fd00::/129']])
        expect(() =>
          createNodeServer({ ...d.compute, config: { ...d.compute.config, rateLimit: { trustedProxies } } }),
        ).toThrow(/rateLimit\.trustedProxies\[0\] is not an IP address or CIDR range/);
    } finally {
      await d.close();
    }
  }, 120_000);
});
