import { execFileSync } from 'node:child_process';
/**
 * The access log of `serve` (host/access-log.ts, docs/operations.md): one JSON line per request
 * with its request id, API method, tenant, principal kind, status, code and duration, and never a
 * secret of the run: the administrator's password, the session token, an API key, a webhook's
 * signing secret, whether they travel in a header, a body, a query string or a path.
 */
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, isPostgresReachable, type TestDatabase } from '@better-compute/db/testing';
import type { AddressInfo } from 'node:net';
import { betterCompute, serve } from '../src/index.js';
import { createNodeServer } from '../src/host/node-adapter.js';
import type { ComputeInstance } from '../src/types.js';
import { type AccessEntry, accessLogger, lineBatch } from '../src/host/access-log.js';

const FIELDS = [
  'log',
  'time',
  'requestId',
  'httpMethod',
  'path',
  'method',
  'tenant',
  'principalKind',
  'status',
  'code',
  'durationMs',
];

describe.runIf(await isPostgresReachable())('the access log of serve', () => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  let url = '';
  const stop = new AbortController();
  let running: Promise<void>;
  const lines: string[] = [];
  const email = 'ops@example.com';
  const password = `pw-${randomBytes(18).toString('base64url')}`;
  const secrets: Record<string, string> = { password };

  async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
    const response = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    return {
      status: response.status,
      body: await response.json(),
      requestId: response.headers.get('x-request-id'),
    };
  }

  beforeAll(async () => {
    database = await createTestDatabase('postgres');
    compute = await betterCompute(
      { database, secret: randomBytes(32).toString('base64url'), trustedOrigins: [], rateLimit: false },
      { log: () => {} },
    );
    await compute.migrate();
    running = serve({
      compute,
      port: 0,
      roles: ['api'],
      signal: stop.signal,
      log: () => {},
      env: { BETTER_COMPUTE_ADMIN_EMAIL: email, BETTER_COMPUTE_ADMIN_PASSWORD: password },
      accessLog: accessLogger('json', (line) => lines.push(line)),
      onListening: (u) => (url = u),
    });
    while (!url) await new Promise((resolve) => setTimeout(resolve, 20));

    // A password sign-in, an API key made with its session, and calls with that key.
    const signedIn = await post('/api/iam/sessions/signIn', { tenantId: 'root', email, password });
    expect(signedIn.status).toBe(200);
    secrets.session = signedIn.body.data.token;
    const created = await post(
      '/api/iam/apiKeys/create',
      { name: 'ops' },
      { authorization: `Bearer ${secrets.session}` },
    );
    expect(created.status).toBe(200);
    secrets.apiKey = created.body.data.key;
    const bearer = { authorization: `Bearer ${secrets.apiKey}` };
    const whoami = await post('/api/compute/system/whoami', {}, { ...bearer, 'x-request-id': 'req-known-1' });
    expect(whoami.status).toBe(200);
    const webhook = await post(
      '/api/compute/webhooks/create',
      { url: 'https://hooks.example.com/compute', events: ['reservation.*'] },
      bearer,
    );
    expect(webhook.status, JSON.stringify(webhook.body)).toBe(200);
    secrets.webhookSecret = webhook.body.data.secret;
    // Secrets where they do not belong: a query string, a path, a refused credential.
    await fetch(`${url}/api/compute/system/version?token=${secrets.apiKey}&password=${password}`, {
      method: 'POST',
      body: '{}',
    });
    await post(`/api/compute/${secrets.webhookSecret}`, {}, bearer);
    await post('/api/compute/system/whoami', {}, { authorization: `Bearer ${secrets.apiKey}x` });
    await post('/api/compute/system/whoami', {}, { cookie: `better-iam.session=${secrets.session}` });
    stop.abort();
    await running;
  });

  afterAll(async () => {
    if (!stop.signal.aborted) {
      stop.abort();
      await running;
    }
    await database.close();
  });

  it('writes one JSON line per request with the fields of docs/operations.md', () => {
    expect(lines).toHaveLength(8);
    const entries = lines.map((line) => JSON.parse(line));
    for (const entry of entries) {
      expect(Object.keys(entry)).toEqual(FIELDS);
      expect(entry.log).toBe('access');
      expect(Date.parse(entry.time)).not.toBeNaN();
      expect(entry.requestId).toMatch(/^[A-Za-z0-9._:-]+$/);
      expect(entry.httpMethod).toBe('POST');
      expect(typeof entry.durationMs).toBe('number');
      expect(entry.durationMs).toBeGreaterThanOrEqual(0);
    }
    expect(entries.find((entry) => entry.requestId === 'req-known-1')).toMatchObject({
      path: '/api/compute/system/whoami',
      method: 'system.whoami',
      status: 200,
      code: 'OK',
    });
    expect(entries[0]).toMatchObject({
      path: '/api/iam/sessions/signIn',
      method: null,
      status: 200,
      code: 'OK',
    });
    expect(entries[4]).toMatchObject({ path: '/api/compute/system/version', method: 'system.version' });
    expect(entries[5]).toMatchObject({ method: null, status: 404, code: 'NOT_FOUND' });
    expect(entries[6]).toMatchObject({ method: 'system.whoami', status: 401, code: 'UNAUTHENTICATED' });
  });

  it('names the tenant and the kind of principal of each call that had them', () => {
    const entries = lines.map((line) => JSON.parse(line));
    expect(entries[2]).toMatchObject({ method: 'system.whoami', tenant: 'root', principalKind: 'person' });
    expect(entries[3]).toMatchObject({ method: 'webhooks.create', tenant: 'root', principalKind: 'person' });
    // A call without a credential has neither.
    expect(entries[4]).toMatchObject({ tenant: 'root', principalKind: null });
    expect(entries[6]).toMatchObject({ tenant: null, principalKind: null });
  });

  it('never writes a secret of the run', () => {
    expect(Object.keys(secrets)).toEqual(['password', 'session', 'apiKey', 'webhookSecret']);
    const log = lines.join('\n');
    for (const [name, value] of Object.entries(secrets)) {
      expect(value.length, name).toBeGreaterThan(16);
      expect(log, name).not.toContain(value);
      // Nor a long piece of one.
      expect(log, name).not.toContain(value.slice(-16));
    }
    expect(log).not.toMatch(/token=|password=|authorization|cookie/i);
  });
});

describe('the lines of serve’s standard output (lineBatch)', () => {
  const turn = () => new Promise((resolve) => setImmediate(resolve));
  // Past the batch's 100 ms wait, by a margin a loaded host's timers need.
  const waited = () => new Promise((resolve) => setTimeout(resolve, 250));
  /** A batch whose writes are kept as text (copied: the batch reuses its buffer). */
  const textBatch = () => {
    const writes: string[] = [];
    return { writes, batch: lineBatch((bytes) => writes.push(Buffer.from(bytes).toString('utf8'))) };
  };

  it('writes the lines held within its wait in one write, in their order, and no sooner', async () => {
    const { writes, batch } = textBatch();
    batch.line('{"n":1}');
    batch.line('{"n":2}');
    await turn();
    batch.line('{"n":3}');
    expect(writes).toEqual([]);
    await waited();
    expect(writes).toEqual(['{"n":1}\n{"n":2}\n{"n":3}\n']);
    batch.line('{"n":4}');
    await waited();
    expect(writes).toEqual(['{"n":1}\n{"n":2}\n{"n":3}\n', '{"n":4}\n']);
    await waited();
    expect(writes).toHaveLength(2);
  });

  it('writes what it holds when the process exits', () => {
    const script = [
      `import { lineBatch } from ${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)};`,
      `const batch = lineBatch((bytes) => process.stdout.write(Buffer.from(bytes)));`,
      `batch.line('held until exit');`,
      `process.exit(0);`,
    ].join('\n');
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(out).toBe('held until exit\n');
  });

  it('writes before 64 KiB would be passed, keeps every line whole and in order, and flushes on demand', async () => {
    const { writes, batch } = textBatch();
    const lines = Array.from({ length: 400 }, (_, i) => `{"n":${i},"path":"/é/${'x'.repeat(240)}/😀"}`);
    for (const line of lines) batch.line(line);
    expect(writes.length).toBeGreaterThan(0);
    for (const write of writes) expect(Buffer.byteLength(write)).toBeLessThanOrEqual(64 * 1024);
    batch.flush();
    expect(writes.join('')).toBe(lines.map((line) => `${line}\n`).join(''));
    // A line longer than the batch goes alone, after what was held.
    batch.line('held');
    const long = 'x'.repeat(30 * 1024);
    batch.line(long);
    expect(writes.slice(-2)).toEqual(['held\n', `${long}\n`]);
    batch.line('last');
    batch.close();
    expect(writes.at(-1)).toBe('last\n');
    const count = writes.length;
    batch.flush();
    await turn();
    expect(writes).toHaveLength(count);
  });
});

describe('serve --log-format', () => {
  it('refuses a format it does not know, and help names the flag', () => {
    const root = join(import.meta.dirname, '..', '..', '..');
    const bin = join(root, 'packages', 'better-compute', 'bin', 'better-compute.cjs');
    const run = (args: string[]) =>
      spawnSync(process.execPath, [bin, ...args], {
        encoding: 'utf8',
        env: { PATH: process.env.PATH ?? '' },
      });
    const help = run(['help', 'serve']);
    expect(help.stdout).toContain('--log-format');
    const refused = run(['serve', '--log-format', 'xml']);
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toMatch(/log-format/);
  });
});

describe('a request its handler never answers', () => {
  it('is written as CLIENT_CLOSED within a second or two of its client leaving', async () => {
    const compute = await betterCompute(
      { database: 'pglite:memory', secret: randomBytes(32).toString('base64url'), rateLimit: false },
      { log: () => {} },
    );
    await compute.migrate();
    const entries: AccessEntry[] = [];
    // The real pipeline, but system.version held forever: the hung handler this case is about.
    const hung: ComputeInstance = {
      ...compute,
      dispatch: (call) =>
        call.pathname.endsWith('/system/version') ? new Promise(() => {}) : compute.dispatch(call),
    };
    const server = createNodeServer(hung, { accessLog: (entry) => entries.push({ ...entry }) });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const left = new AbortController();
      const asked = fetch(`http://127.0.0.1:${port}/api/compute/system/version`, {
        method: 'POST',
        body: '{}',
        signal: left.signal,
      }).catch((error: unknown) => error);
      const answered = await fetch(`http://127.0.0.1:${port}/api/compute/system/whoami`, {
        method: 'POST',
        body: '{}',
      });
      expect(answered.status).toBe(401);
      await new Promise((resolve) => setTimeout(resolve, 200));
      // Open, and not written while the client waits.
      expect(entries.map((entry) => entry.method)).toEqual(['system.whoami']);
      left.abort();
      await asked;
      const started = Date.now();
      while (entries.length < 2 && Date.now() - started < 10_000)
        await new Promise((resolve) => setTimeout(resolve, 50));
      expect(entries[1]).toMatchObject({
        method: 'system.version',
        status: 0,
        code: 'CLIENT_CLOSED',
        path: '/api/compute/system/version',
      });
    } finally {
      await new Promise((resolve) => server.close(resolve));
      server.closeAllConnections();
      await compute.close();
    }
  });
});
