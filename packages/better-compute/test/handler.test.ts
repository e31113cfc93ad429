import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabaseKinds } from '@better-compute/db/testing';
import { call, createTestDeployment, eventually, type TestDeployment } from './support.js';

const kinds = await testDatabaseKinds();

const acme = 't-acme-alice';

describe.each(kinds)('the request pipeline on %s', (kind) => {
  let deployment: TestDeployment;
  beforeAll(async () => {
    deployment = await createTestDeployment(kind);
  });
  afterAll(async () => {
    await deployment?.close();
  });

  it('system.version is public and answers in the envelope', async () => {
    const { status, body } = await call(deployment.compute, 'system.version', {});
    expect(status).toBe(200);
    expect(body.data).toMatchObject({ product: 'better-compute', apiVersion: 1 });
  });

  it('a 70 KiB body gets 413 with PAYLOAD_TOO_LARGE in the envelope', async () => {
    const { status, body } = await call(deployment.compute, 'system.version', { pad: 'x'.repeat(70 * 1024) });
    expect(status).toBe(413);
    expect(body.error?.code).toBe('PAYLOAD_TOO_LARGE');
    expect(body.error?.requestId).toMatch(/^req_/);
  });

  it('malformed JSON is INVALID_ARGUMENT', async () => {
    const { status, body } = await call(deployment.compute, 'system.version', null, {
      rawBody: '{"tenantId": ',
    });
    expect(status).toBe(400);
    expect(body.error).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'the request body is not valid JSON',
    });
  });

  it('an unknown route is NOT_FOUND', async () => {
    const { status, body } = await call(deployment.compute, 'nothing.here', {});
    expect(status).toBe(404);
    expect(body.error?.code).toBe('NOT_FOUND');
  });

  it('keeps the caller’s request id', async () => {
    const { body } = await call(
      deployment.compute,
      'nothing.here',
      {},
      { headers: { 'x-request-id': 'my-req-1' } },
    );
    expect(body.error?.requestId).toBe('my-req-1');
  });

  it('a token method without a credential is UNAUTHENTICATED; an unknown token too', async () => {
    expect((await call(deployment.compute, 'system.whoami', {})).body.error?.code).toBe('UNAUTHENTICATED');
    expect((await call(deployment.compute, 'system.whoami', {}, { token: 'nope' })).status).toBe(401);
  });

  it('fills tenantId from the credential and refuses another tenant before reading anything', async () => {
    const own = await call(deployment.compute, 'system.whoami', {}, { token: acme });
    expect(own.body.data).toMatchObject({
      tenantId: 'acme',
      actingTenantId: 'acme',
      platformOperator: false,
    });
    const foreign = await call(deployment.compute, 'events.list', { tenantId: 'globex' }, { token: acme });
    expect(foreign.status).toBe(403);
    expect(foreign.body.error).toMatchObject({
      code: 'ACCESS_DENIED',
      details: { reason: 'foreign-tenant' },
      hint: 'Act in acme (--tenant acme, or leave --tenant out), or use a credential of globex.',
    });
    const operator = await call(
      deployment.compute,
      'events.list',
      { tenantId: 'globex' },
      { token: 't-root-ops' },
    );
    expect(operator.status).toBe(200);
  });

  it('a suspended tenant gets TENANT_SUSPENDED', async () => {
    deployment.bridge.suspended.add('globex');
    try {
      const { status, body } = await call(deployment.compute, 'system.whoami', {}, { token: 't-globex-bob' });
      expect(status).toBe(403);
      expect(body.error?.code).toBe('TENANT_SUSPENDED');
    } finally {
      deployment.bridge.suspended.delete('globex');
    }
  });

  it('input is validated with the issues in details', async () => {
    const { status, body } = await call(deployment.compute, 'events.list', { limit: 0 }, { token: acme });
    expect(status).toBe(400);
    expect(body.error?.code).toBe('INVALID_ARGUMENT');
    // One shape on both route sets (docs/request-checks.md): the path as zod gives it, keys and indexes.
    expect(body.error?.details?.issues).toEqual([
      { path: ['limit'], code: 'too_small', message: expect.any(String) },
    ]);
    expect(body.error?.message).toMatch(/^limit: /);
  });

  it('IAM’s refusal is ACCESS_DENIED, and a denied mutation is audited but changes nothing', async () => {
    const { status, body } = await call(
      deployment.compute,
      'plugins.test.widgets.create',
      { name: 'x' },
      { token: 't-acme-denied' },
    );
    expect(status).toBe(403);
    // The tenant is right, so the hint names what is missing: a role that grants the action.
    expect(body.error).toMatchObject({
      code: 'ACCESS_DENIED',
      details: { action: 'compute:widgets:create', reason: 'no binding' },
      hint: 'Your roles in tenant acme do not grant compute:widgets:create: ask an administrator of acme to bind a role that does (better-iam bindings).',
    });
    const audit = await deployment.database.db
      .selectFrom('compute.audit_events')
      .selectAll()
      .where('actor', '=', 'usr_denied')
      .execute();
    expect(audit).toEqual([expect.objectContaining({ outcome: 'denied', action: 'compute:widgets:create' })]);
  });

  describe('cookie credentials', () => {
    const cookie = { cookie: `better-iam.session=${acme}` };
    it('are refused without X-Better-Compute: 1', async () => {
      const { status, body } = await call(
        deployment.compute,
        'system.whoami',
        {},
        { headers: { ...cookie, origin: 'https://console.example.com' } },
      );
      expect(status).toBe(403);
      expect(body.error?.details).toEqual({ reason: 'csrf' });
    });
    it('are refused from a foreign Origin', async () => {
      const { status } = await call(
        deployment.compute,
        'system.whoami',
        {},
        {
          headers: { ...cookie, origin: 'https://evil.example.com', 'x-better-compute': '1' },
        },
      );
      expect(status).toBe(403);
    });
    it('are accepted with the header from the trusted Origin', async () => {
      const { status, body } = await call(
        deployment.compute,
        'system.whoami',
        {},
        {
          headers: { ...cookie, origin: 'https://console.example.com', 'x-better-compute': '1' },
        },
      );
      expect(status).toBe(200);
      expect(body.data).toMatchObject({ principalId: 'usr_alice' });
    });
  });

  it('a mutation writes its change, its event and its audit entry together, or none of them', async () => {
    const ok = await call(
      deployment.compute,
      'plugins.test.widgets.create',
      { name: 'kept' },
      { token: acme },
    );
    expect(ok.status).toBe(200);
    const failed = await call(
      deployment.compute,
      'plugins.test.widgets.create',
      { name: 'lost', fail: true },
      { token: acme },
    );
    expect(failed.body.error?.code).toBe('INTERNAL');
    expect(failed.body.error?.message).toBe('internal error');
    const widgets = (await deployment.database.db
      .selectFrom('compute.test_widgets' as never)
      .selectAll()
      .execute()) as { name: string }[];
    expect(widgets.map((w: { name: string }) => w.name)).toContain('kept');
    expect(widgets.map((w: { name: string }) => w.name)).not.toContain('lost');
    const names = await eventually(
      async () => {
        const events = await call(deployment.compute, 'events.list', { type: 'widget.' }, { token: acme });
        return (events.body.data as { items: { data: { name: string } }[] }).items.map((e) => e.data.name);
      },
      (found) => found.includes('kept'),
    );
    expect(names).toContain('kept');
    expect(names).not.toContain('lost');
    const audits = await deployment.database.db
      .selectFrom('compute.audit_events')
      .select(['outcome', 'error_code'])
      .where('actor', '=', 'usr_alice')
      .execute();
    expect(audits).toEqual(
      expect.arrayContaining([
        { outcome: 'allowed', error_code: null },
        { outcome: 'failed', error_code: 'INTERNAL' },
      ]),
    );
  });

  it('50 concurrent calls with one idempotency key give one result; another input with it is CONFLICT', async () => {
    const input = { name: 'once', idempotencyKey: `key-${kind}-0001` };
    const answers = await Promise.all(
      Array.from({ length: 50 }, () =>
        call(deployment.compute, 'plugins.test.widgets.create', input, { token: acme }),
      ),
    );
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const ids = new Set(answers.map((a) => (a.body.data as { id: string }).id));
    expect(ids.size).toBe(1);
    const rows = await deployment.database.db
      .selectFrom('compute.test_widgets' as never)
      .selectAll()
      .where('name' as never, '=', 'once' as never)
      .execute();
    expect(rows).toHaveLength(1);
    const conflict = await call(
      deployment.compute,
      'plugins.test.widgets.create',
      { ...input, name: 'other' },
      { token: acme },
    );
    expect(conflict.status).toBe(409);
    expect(conflict.body.error?.code).toBe('CONFLICT');
  });

  it('events.list pages with colon cursors and refuses the dotted form', async () => {
    for (let i = 0; i < 5; i++)
      await call(
        deployment.compute,
        'plugins.test.widgets.create',
        { name: `page-${i}` },
        { token: 't-globex-pager' },
      );
    const seen = await eventually(
      async () => {
        const names: string[] = [];
        let cursor: string | undefined;
        do {
          const page = await call(
            deployment.compute,
            'events.list',
            { limit: 2, ...(cursor ? { cursor } : {}) },
            { token: 't-globex-pager' },
          );
          const data = page.body.data as {
            items: { position: string; data: { name: string } }[];
            nextCursor: string | null;
          };
          names.push(...data.items.map((e) => e.data.name));
          cursor = data.nextCursor ?? undefined;
          if (cursor) expect(cursor).toMatch(/^\d+:\d+$/);
        } while (cursor);
        return names;
      },
      (names) => names.length === 5,
    );
    expect(seen).toEqual(['page-0', 'page-1', 'page-2', 'page-3', 'page-4']);
    const dotted = await call(
      deployment.compute,
      'events.list',
      { cursor: '123.4' },
      { token: 't-globex-pager' },
    );
    expect(dotted.body.error?.code).toBe('INVALID_ARGUMENT');
  });

  it('system.routes lists the live route table with public flags and actions', async () => {
    const { body } = await call(deployment.compute, 'system.routes', {}, { token: acme });
    const items = (body.data as { items: { method: string; public: boolean; action: string | null }[] })
      .items;
    expect(items).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ method: 'system.version', public: true, action: null }),
        expect.objectContaining({ method: 'events.list', public: false, action: 'compute:events:read' }),
        expect.objectContaining({ method: 'plugins.test.widgets.create', action: 'compute:widgets:create' }),
      ]),
    );
  });
});

describe('rate limiting', () => {
  it('answers RATE_LIMITED with retryAfterMs once the burst is spent', async () => {
    const deployment = await createTestDeployment('pglite', {
      rateLimit: { perSecond: 1, burst: 3, costs: { 'system.whoami': 1 } },
    });
    try {
      const answers = [];
      for (let i = 0; i < 4; i++)
        answers.push(await call(deployment.compute, 'system.whoami', {}, { token: acme }));
      expect(answers.slice(0, 3).every((a) => a.status === 200)).toBe(true);
      expect(answers[3]!.status).toBe(429);
      expect(answers[3]!.body.error?.code).toBe('RATE_LIMITED');
      expect(answers[3]!.body.error?.details?.retryAfterMs).toBeGreaterThan(0);
    } finally {
      await deployment.close();
    }
  });
});

describe('idempotency keys after 24 hours', () => {
  it('a key past its 24 hours is forgotten: the same key runs as a new call, even with another input', async () => {
    let now = Date.now();
    const { createTestDatabase } = await import('@better-compute/db/testing');
    const { betterCompute } = await import('../src/index.js');
    const { TestBridge, widgetsModule } = await import('./support.js');
    const database = await createTestDatabase('pglite');
    try {
      const compute = await betterCompute(
        { database, iam: new TestBridge(), rateLimit: false },
        { modules: [widgetsModule], log: () => {}, now: () => new Date(now) },
      );
      await compute.migrate();
      const input = { name: 'day-one', idempotencyKey: 'key-expiry-0001' };
      const first = await call(compute, 'plugins.test.widgets.create', input, { token: acme });
      const replay = await call(compute, 'plugins.test.widgets.create', input, { token: acme });
      expect((replay.body.data as { id: string }).id).toBe((first.body.data as { id: string }).id);
      now += 24 * 60 * 60 * 1000 + 1000;
      const later = await call(
        compute,
        'plugins.test.widgets.create',
        { ...input, name: 'day-two' },
        { token: acme },
      );
      expect(later.status).toBe(200);
      expect((later.body.data as { id: string; name: string }).name).toBe('day-two');
      const again = await call(
        compute,
        'plugins.test.widgets.create',
        { ...input, name: 'day-two' },
        { token: acme },
      );
      expect((again.body.data as { id: string }).id).toBe((later.body.data as { id: string }).id);
      await compute.close();
    } finally {
      await database.close();
    }
  });
});
