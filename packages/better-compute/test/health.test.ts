/**
 * `/healthz` and `/readyz` (host/health.ts, docs/operations.md): liveness touches nothing, readiness
 * follows a real PostgreSQL database as it goes away and comes back, a flood of probes costs one
 * query a second, and no probe answers a 5xx other than the readiness 503.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import {
  createTestDatabase,
  isPostgresReachable,
  TEST_DATABASE_URL,
  type TestDatabase,
} from '@better-compute/db/testing';
import { openDatabase } from '@better-compute/db';
import { betterCompute, serve } from '../src/index.js';
import type { ComputeInstance } from '../src/types.js';
import { createProbes, type RoleState } from '../src/host/health.js';
import { createNodeServer } from '../src/host/node-adapter.js';
import { closeServer, listen } from '../src/host/serve.js';
import { TestBridge } from './support.js';

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function probe(url: string, path: string, init: RequestInit = {}) {
  const response = await fetch(`${url}${path}`, init);
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
}

/** A raw request, for what fetch will not send (a bad Host header, NUL bytes, a huge path). */
function raw(url: string, path: string, headers: Record<string, string> = {}) {
  const { hostname, port } = new URL(url);
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = httpRequest({ hostname, port, path, headers, method: 'GET' }, (res) => {
      let body = '';
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe.runIf(await isPostgresReachable())('readiness on PostgreSQL', () => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  let url = '';
  const stop = new AbortController();
  let running: Promise<void>;
  const lines: string[] = [];
  let name: string;

  async function asAdmin(statement: string): Promise<void> {
    const admin = await openDatabase({ url: TEST_DATABASE_URL, poolSize: 1 });
    try {
      await sql.raw(statement).execute(admin.db);
    } finally {
      await admin.close();
    }
  }

  beforeAll(async () => {
    database = await createTestDatabase('postgres');
    name = new URL(database.url!).pathname.slice(1);
    compute = await betterCompute({ database, iam: new TestBridge() }, { log: () => {} });
    await compute.migrate();
    running = serve({
      compute,
      port: 0,
      roles: ['api', 'controllers', 'sinks'],
      signal: stop.signal,
      log: (line) => lines.push(line),
      onListening: (u) => (url = u),
    });
    await until('serve', async () => url);
  });

  afterAll(async () => {
    await asAdmin(`alter database ${name} allow_connections true`).catch(() => {});
    stop.abort();
    await running;
    await database.close();
  });

  it('answers 200 while the database answers, 503 naming it while it is gone, 200 when it is back', async () => {
    const ready = await probe(url, '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ ok: true, checks: { database: 'ok', schema: 'ok', roles: 'ok' } });
    expect(ready.headers.get('cache-control')).toBe('no-store');

    // The database refuses new connections, and the pool's open ones are cut.
    await asAdmin(`alter database ${name} allow_connections false`);
    await asAdmin(
      `select pg_terminate_backend(pid) from pg_stat_activity where datname = '${name}' and pid <> pg_backend_pid()`,
    );
    const gone = await until('readiness to drop', async () => {
      const answer = await probe(url, '/readyz');
      return answer.status === 503 && answer;
    });
    expect(gone.body).toEqual({
      ok: false,
      failed: ['database', 'schema'],
      checks: { database: 'unreachable', schema: 'unknown', roles: 'ok' },
    });
    // Liveness does not follow the database: restarting the process would not bring it back.
    expect(await probe(url, '/healthz')).toMatchObject({ status: 200, body: { ok: true } });
    // The driver's reason goes to the server's log, once, not to the prober.
    expect(lines.filter((line) => line.startsWith('readiness: database unreachable'))).toHaveLength(1);
    expect(JSON.stringify(gone.body)).not.toContain(name);

    await asAdmin(`alter database ${name} allow_connections true`);
    const back = await until('readiness to come back', async () => {
      const answer = await probe(url, '/readyz');
      return answer.status === 200 && answer;
    });
    expect(back.body).toMatchObject({ ok: true });
    expect(lines).toContain('readiness: database ok');
  });

  it('answers 503 when the database holds the query past the timeout, and stays at one query', async () => {
    // A lock on the ledger makes the readiness query wait: the database is there and does not answer.
    // Two connections: one holds the lock, the other looks at who waits on it.
    const admin = await openDatabase({ url: TEST_DATABASE_URL.replace(/\/[^/]*$/, `/${name}`), poolSize: 2 });
    try {
      // Past the second a cached answer is kept for.
      await new Promise((resolve) => setTimeout(resolve, 1100));
      // The lock is held until the probes have answered, however slow the host: an answer that came
      // while it was held came from the timeout, not from the database.
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let locked!: () => void;
      const lockTaken = new Promise<void>((resolve) => (locked = resolve));
      const held = admin.db.transaction().execute(async (trx) => {
        await sql`lock table public.better_compute_migrations in access exclusive mode`.execute(trx);
        locked();
        await released;
      });
      await lockTaken;
      let answers: Awaited<ReturnType<typeof probe>>[];
      try {
        answers = await Promise.all(Array.from({ length: 20 }, () => probe(url, '/readyz')));
        const waiting = await sql<{ count: number }>`
          select count(*)::int as count from pg_stat_activity
          where datname = ${name} and wait_event_type = 'Lock'`.execute(admin.db);
        // Only the one readiness query waits on the lock, however many probes came.
        expect(waiting.rows[0]!.count).toBeLessThanOrEqual(1);
      } finally {
        release();
        await held;
      }
      for (const answer of answers) {
        expect(answer.status).toBe(503);
        expect(answer.body.checks.database).toBe('no answer within 1000 ms');
      }
      await until('readiness after the lock', async () => (await probe(url, '/readyz')).status === 200);
    } finally {
      await admin.close();
    }
  });
});

describe('probes', () => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  const statements: string[] = [];

  beforeAll(async () => {
    database = await createTestDatabase('pglite', 1, (statement) => statements.push(statement));
    compute = await betterCompute({ database, iam: new TestBridge() }, { log: () => {} });
  });
  afterAll(async () => {
    await compute.close();
    await database.close();
  });

  async function serving(roles: RoleState, run: (url: string) => Promise<void>): Promise<void> {
    const server = createNodeServer(compute, { probes: createProbes({ compute, roles }) });
    const url = await listen(server, 0, '127.0.0.1');
    try {
      await run(url);
    } finally {
      await closeServer(server);
    }
  }

  it('says the schema is behind before migrations, and the roles that are not running', async () => {
    const roles: RoleState = { wanted: ['api', 'controllers'], running: new Set(['api']), stopping: false };
    await serving(roles, async (url) => {
      const behind = await probe(url, '/readyz');
      expect(behind.status).toBe(503);
      expect(behind.body.failed).toEqual(['schema', 'roles']);
      expect(behind.body.checks.database).toBe('ok');
      expect(behind.body.checks.schema).toMatch(/^\d+ migration\(s\) pending: run better-compute migrate$/);
      expect(behind.body.checks.roles).toBe('not running yet: controllers');
      await compute.migrate();
      roles.running.add('controllers');
      await until('readiness', async () => (await probe(url, '/readyz')).status === 200);
      roles.stopping = true;
      // A replica told to stop drains: the load balancer takes it out before it closes.
      expect(await probe(url, '/readyz')).toMatchObject({
        status: 503,
        body: { ok: false, failed: ['roles'], checks: { roles: 'stopping' } },
      });
    });
  });

  it('costs no query for liveness and one query a second for a flood of readiness probes', async () => {
    const roles: RoleState = { wanted: ['api'], running: new Set(['api']), stopping: false };
    await compute.migrate();
    await serving(roles, async (url) => {
      statements.length = 0;
      for (let i = 0; i < 30; i++) expect((await probe(url, '/healthz')).body).toEqual({ ok: true });
      expect(statements).toEqual([]);
      // The ledger read is two statements, made at most once a second however many probes come:
      // counted against the seconds the probes took, so a slow host does not fail it.
      const perSecond = (startedAt: number) => 1 + Math.ceil((Date.now() - startedAt) / 1000);
      let startedAt = Date.now();
      const answers = await Promise.all(Array.from({ length: 100 }, () => probe(url, '/readyz')));
      expect(answers.every((answer) => answer.status === 200)).toBe(true);
      const flood = statements.length;
      expect(flood).toBeGreaterThan(0);
      expect(flood).toBeLessThanOrEqual(2 * perSecond(startedAt));
      startedAt = Date.now();
      for (let i = 0; i < 50; i++) await probe(url, '/readyz');
      expect(statements.length - flood).toBeLessThanOrEqual(2 * perSecond(startedAt));
    });
  });

  it('answers what an attacker sends without a 5xx, a credential or the API', async () => {
    const roles: RoleState = { wanted: ['api'], running: new Set(['api']), stopping: false };
    await serving(roles, async (url) => {
      const post = await probe(url, '/readyz', { method: 'POST', body: '{}' });
      expect(post.status).toBe(404);
      expect(post.body.error.code).toBe('NOT_FOUND');
      const head = await fetch(`${url}/healthz`, { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(await head.text()).toBe('');
      // A credential changes nothing, a query string is ignored.
      expect(
        await probe(url, `/readyz?x=${'a'.repeat(4000)}`, { headers: { authorization: 'Bearer nonsense' } }),
      ).toMatchObject({ status: 200, body: { ok: true } });
      // Any Host header, as a prober addressing the replica by its pod address sends.
      expect(await raw(url, '/healthz', { host: 'a/b@c' })).toMatchObject({ status: 200 });
      for (const path of ['/readyz%00', '/healthz/', '/healthz/../readyz', `/${'x'.repeat(8000)}`]) {
        const answer = await raw(url, path);
        expect(answer.status, path).toBeLessThan(500);
      }
    });
  });
});

describe('a replica without the API', () => {
  it('answers the probes and nothing else', async () => {
    const database = await createTestDatabase('pglite');
    const compute = await betterCompute({ database, iam: new TestBridge() }, { log: () => {} });
    await compute.migrate();
    const stop = new AbortController();
    let url = '';
    const running = serve({
      compute,
      port: 0,
      roles: ['gateway'],
      signal: stop.signal,
      log: () => {},
      onListening: (u) => (url = u),
    });
    try {
      await until('serve', async () => url);
      expect(await probe(url, '/healthz')).toMatchObject({ status: 200, body: { ok: true } });
      expect(await probe(url, '/readyz')).toMatchObject({ status: 200, body: { ok: true } });
      expect((await fetch(`${url}/api/compute/system/version`, { method: 'POST' })).status).toBe(404);
    } finally {
      stop.abort();
      await running;
      await database.close();
    }
  });
});
