/**
 * The request checks both route sets share (core's request-checks.ts, docs/request-checks.md), tried
 * on compute's routes and IAM's alike with the real embedded Better IAM, in memory and through the
 * Node adapter on a loopback port with raw HTTP (a client library would normalise what is tried here).
 */
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { createNodeServer } from '../src/host/node-adapter.js';

const kinds = await testDatabaseKinds();

/** One request as raw bytes, so the path and headers reach the server exactly as written. */
function rawRequest(port: number, head: string, body = '{}'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => (received += chunk));
    socket.on('error', reject);
    socket.on('end', () => {
      const status = Number(received.slice(9, 12));
      resolve({ status, body: received.slice(received.indexOf('\r\n\r\n') + 4) });
    });
    socket.write(
      `${head}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });
}

describe.each(kinds)('request checks on both route sets, on %s', (kind) => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  let server: Server;
  let port: number;
  let adminKey: string;

  beforeAll(async () => {
    database = await createTestDatabase(kind);
    compute = await betterCompute({ database, rateLimit: false }, { log: () => {} });
    await compute.migrate();
    adminKey = (await compute.embeddedIam!.bootstrapDev())!.acmeAdmin.apiKey;
    server = createNodeServer(compute);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  }, 120_000);

  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await compute?.close();
    await database?.close();
  });

  const post = async (path: string, body: unknown, headers: Record<string, string> = {}) => {
    const response = await compute.handler(
      new Request(`http://127.0.0.1:8080${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      }),
    );
    return {
      status: response.status,
      body: (await response.json()) as { error?: Record<string, any>; data?: any },
    };
  };
  const asAdmin = () => ({ authorization: `Bearer ${adminKey}` });

  it('validation failures have one shape: details.issues[] of { path: keys and indexes, code, message }', async () => {
    const computeAnswer = await post('/api/compute/events/list', { tenantId: 'acme', limit: 0 }, asAdmin());
    const iamAnswer = await post('/api/iam/principals/list', { tenantId: 'acme', limit: 0 }, asAdmin());
    for (const answer of [computeAnswer, iamAnswer]) {
      expect(answer.status).toBe(400);
      expect(answer.body.error).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^limit: /),
        details: { issues: [{ path: ['limit'], code: 'too_small', message: expect.any(String) }] },
      });
    }
    const nested = await post(
      '/api/compute/sites/create',
      { tenantId: 'acme', name: 'a', region: 'r', labels: { ok: 5 } },
      asAdmin(),
    );
    expect(nested.body.error?.details?.issues?.[0]?.path).toEqual(['labels', 'ok']);
  });

  it('a NUL or an unpaired surrogate anywhere in a body is INVALID_ARGUMENT naming where (issue 15)', async () => {
    const cases: [string, unknown, (string | number)[]][] = [
      [
        '/api/compute/sites/create',
        { tenantId: 'acme', name: 'a', region: 'r', description: 'x\u0000y' },
        ['description'],
      ],
      ['/api/compute/events/list', { tenantId: 'acme', cursor: 'a\ud800' }, ['cursor']],
      ['/api/iam/apiKeys/create', { tenantId: 'acme', name: 'k\u0000' }, ['name']],
      ['/api/iam/bindings/list', { tenantId: 'acme', cursor: '\u0005\u0000' }, ['cursor']],
      [
        '/api/compute/sites/create',
        { tenantId: 'acme', name: 'a', region: 'r', labels: { 'k\u0000': 'v' } },
        ['labels', 'k\u0000'],
      ],
    ];
    for (const [path, body, where] of cases) {
      const answer = await post(path, body, asAdmin());
      expect(answer.status, path).toBe(400);
      expect(answer.body.error, path).toMatchObject({
        code: 'INVALID_ARGUMENT',
        details: { issues: [{ path: where, code: 'unstorable' }] },
      });
    }
  });

  it('a malformed percent-encoded session cookie is no credential, never a 500 (issue 15)', async () => {
    for (const path of ['/api/compute/system/whoami', '/api/iam/principals/list']) {
      for (const cookie of [
        'better-iam.session=%',
        'better-iam.session=%E0%A4%A',
        'better-iam.session=%zz',
      ]) {
        const answer = await post(
          path,
          { tenantId: 'acme' },
          {
            cookie,
            'x-better-compute': '1',
            origin: 'http://127.0.0.1:8080',
          },
        );
        expect(answer.status, `${path} ${cookie}`).toBe(401);
        expect(answer.body.error?.code).toBe('UNAUTHENTICATED');
      }
    }
  });

  it('without trustedOrigins a cookie counts only from a loopback origin, and the refusal says so (issue 15)', async () => {
    const cookie = { cookie: 'better-iam.session=x', 'x-better-compute': '1' };
    for (const path of ['/api/compute/system/whoami', '/api/iam/principals/list']) {
      const remote = await compute.handler(
        new Request(`https://compute.example.com${path}`, {
          method: 'POST',
          headers: { ...cookie, origin: 'https://compute.example.com' },
          body: '{}',
        }),
      );
      expect(remote.status).toBe(403);
      const refusal = ((await remote.json()) as { error: { hint: string } }).error;
      expect(refusal.hint).toContain('trustedOrigins');
      // From loopback the cookie is read (and this one is unknown).
      const local = await post(path, {}, { ...cookie, origin: 'http://127.0.0.1:8080' });
      expect(local.status).toBe(401);
    }
  });

  it('a path with dot segments or encoded slashes is refused before routing, on both sets (issue 15)', async () => {
    const paths = [
      '/api/iam/%2e%2e/compute/system/whoami',
      '/api/iam/%2E%2e/compute/system/whoami',
      '/api/iam/../compute/system/whoami',
      '/api/compute/./system/version',
      '/api/compute/system%2Fversion',
      '/api/iam/sessions%5cget',
      '/api/compute/system/version%00',
    ];
    for (const path of paths) {
      const answer = await rawRequest(
        port,
        `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${adminKey}`,
      );
      expect(answer.status, path).toBe(400);
      expect(JSON.parse(answer.body).error.code, path).toBe('INVALID_ARGUMENT');
    }
    const plain = await rawRequest(port, 'POST /api/compute/system/version HTTP/1.1\r\nhost: 127.0.0.1');
    expect(plain.status).toBe(200);
  });

  it('a Host header no URL can hold is a 400, on compute’s routes and IAM’s (issue 15)', async () => {
    for (const host of ['a b', '[', 'x:99999', 'u@evil', 'a/b']) {
      for (const path of ['/api/compute/system/version', '/api/iam/sessions/get']) {
        const answer = await rawRequest(port, `POST ${path} HTTP/1.1\r\nhost: ${host}`);
        expect(answer.status, `${host} ${path}`).toBe(400);
        expect(JSON.parse(answer.body).error.code).toBe('INVALID_ARGUMENT');
      }
    }
  });
});
