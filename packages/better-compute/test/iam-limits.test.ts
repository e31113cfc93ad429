/**
 * IAM limited like compute (issue 15): one per-identity rate limit across compute's routes and the
 * embedded IAM's; caps per person (API keys, sessions) and per tenant (principals, roles, bindings,
 * child tenants), each refused as QUOTA_EXCEEDED naming the limit; and tenants created only by those
 * who may (docs/decisions/tenant-creation.md). With the real embedded Better IAM.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, testDatabaseKinds } from '@better-compute/db/testing';
import { betterCompute } from '../src/index.js';

const kinds = await testDatabaseKinds();

async function deployment(kind: Awaited<typeof kinds>[number], extra: Record<string, unknown>) {
  const database = await createTestDatabase(kind);
  const compute = await betterCompute({ database, ...extra }, { log: () => {} });
  await compute.migrate();
  const dev = (await compute.embeddedIam!.bootstrapDev())!;
  const call = async (path: string, body: Record<string, unknown>, token: string) => {
    const response = await compute.handler(
      new Request(`http://localhost${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }),
    );
    return { status: response.status, ...((await response.json()) as { data?: any; error?: any }) };
  };
  return { database, compute, dev, call };
}

describe.each(kinds)('IAM’s limits on %s', (kind) => {
  describe('the rate limit', () => {
    let d: Awaited<ReturnType<typeof deployment>>;
    beforeAll(async () => {
      // whoami is a read (half a token by default); here it costs what an IAM call costs.
      d = await deployment(kind, { rateLimit: { perSecond: 1, burst: 10, costs: { 'system.whoami': 1 } } });
    }, 120_000);
    afterAll(async () => {
      await d?.compute.close();
      await d?.database.close();
    });

    it('one identity has one budget across compute’s routes and IAM’s; past it both answer RATE_LIMITED', async () => {
      const key = d.dev.acmeMember.apiKey;
      const answers = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          i % 2 === 0
            ? d.call('/api/iam/sessions/get', {}, key)
            : d.call('/api/compute/system/whoami', {}, key),
        ),
      );
      const allowed = answers.filter((a) => a.status === 200);
      const limited = answers.filter((a) => a.status === 429);
      expect(allowed.length).toBeLessThanOrEqual(11);
      expect(limited.length).toBeGreaterThanOrEqual(29);
      for (const refusal of limited) {
        expect(refusal.error).toMatchObject({
          code: 'RATE_LIMITED',
          details: { retryAfterMs: expect.any(Number) },
        });
      }
      // Both route sets refuse once the shared budget is spent.
      expect((await d.call('/api/iam/apiKeys/list', {}, key)).error?.code).toBe('RATE_LIMITED');
      expect((await d.call('/api/compute/pools/list', {}, key)).error?.code).toBe('RATE_LIMITED');
      // Another identity is not held back by it.
      expect((await d.call('/api/iam/sessions/get', {}, d.dev.acmeAdmin.apiKey)).status).toBe(200);
    });
  });

  describe('caps and tenant creation', () => {
    let d: Awaited<ReturnType<typeof deployment>>;
    beforeAll(async () => {
      d = await deployment(kind, {
        rateLimit: false,
        iamLimits: {
          apiKeysPerPrincipal: 3,
          sessionsPerPerson: 2,
          rolesPerTenant: 1,
          principalsPerTenant: 5,
        },
      });
    }, 120_000);
    afterAll(async () => {
      await d?.compute.close();
      await d?.database.close();
    });

    it('a person holds at most apiKeysPerPrincipal live keys; revoking one frees a place', async () => {
      const key = d.dev.acmeMember.apiKey; // the member's first key
      const made = [];
      for (const name of ['b', 'c']) made.push(await d.call('/api/iam/apiKeys/create', { name }, key));
      expect(made.map((m) => m.status)).toEqual([200, 200]);
      const over = await d.call('/api/iam/apiKeys/create', { name: 'd' }, key);
      expect(over.status).toBe(409);
      expect(over.error).toMatchObject({
        code: 'QUOTA_EXCEEDED',
        details: { limit: 'apiKeysPerPrincipal', max: 3 },
      });
      expect(over.error.message).toContain('apiKeysPerPrincipal');
      await d.call('/api/iam/apiKeys/revoke', { apiKeyId: made[0]!.data.apiKey.id }, key);
      expect((await d.call('/api/iam/apiKeys/create', { name: 'd' }, key)).status).toBe(200);
    });

    it('a person holds at most sessionsPerPerson open sessions', async () => {
      const signIn = () =>
        d.compute.handler(
          new Request('http://localhost/api/iam/sessions/signIn', {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({
              tenantId: 'acme',
              email: d.dev.acmeAdmin.email,
              password: d.dev.acmeAdmin.password,
            }),
          }),
        );
      expect((await signIn()).status).toBe(200);
      expect((await signIn()).status).toBe(200);
      const over = (await (await signIn()).json()) as { error: any };
      expect(over.error).toMatchObject({ code: 'QUOTA_EXCEEDED', details: { limit: 'sessionsPerPerson' } });
    });

    it('a tenant holds at most rolesPerTenant roles and principalsPerTenant principals', async () => {
      const admin = d.dev.acmeAdmin.apiKey;
      expect(
        (await d.call('/api/iam/roles/create', { name: 'one', actions: ['compute:*:read'] }, admin)).status,
      ).toBe(200);
      const role = await d.call('/api/iam/roles/create', { name: 'two', actions: ['compute:*:read'] }, admin);
      expect(role.error).toMatchObject({
        code: 'QUOTA_EXCEEDED',
        details: { limit: 'rolesPerTenant', max: 1 },
      });
      const made: number[] = [];
      for (let i = 0; i < 4; i++)
        made.push(
          (
            await d.call(
              '/api/iam/principals/create',
              { kind: 'service-account', displayName: `sa${i}` },
              admin,
            )
          ).status,
        );
      // acme has its administrator and its member already: 5 in all, then no more.
      expect(made).toEqual([200, 200, 200, 409]);
    });

    it('only platform operators create tenants unless the deployment allows children', async () => {
      const refused = await d.call(
        '/api/iam/tenants/create',
        { id: 'acme-dev', name: 'Dev' },
        d.dev.acmeAdmin.apiKey,
      );
      expect(refused.status).toBe(403);
      expect(refused.error).toMatchObject({
        code: 'ACCESS_DENIED',
        details: { reason: 'tenant-creation-off' },
      });
      expect(refused.error.hint).toContain('childTenantsPerTenant');
      const byPlatform = await d.call(
        '/api/iam/tenants/create',
        { id: 'acme-dev', name: 'Dev', parentId: 'acme' },
        d.dev.rootAdmin.apiKey,
      );
      expect(byPlatform.status).toBe(200);
    });
  });

  describe('child tenants allowed with a cap', () => {
    let d: Awaited<ReturnType<typeof deployment>>;
    beforeAll(async () => {
      d = await deployment(kind, { rateLimit: false, iamLimits: { childTenantsPerTenant: 1 } });
    }, 120_000);
    afterAll(async () => {
      await d?.compute.close();
      await d?.database.close();
    });

    it('a tenant administrator creates children under its own tenant, up to the cap, and nowhere else', async () => {
      const admin = d.dev.acmeAdmin.apiKey;
      const first = await d.call('/api/iam/tenants/create', { id: 'acme-one', name: 'One' }, admin);
      expect(first.status).toBe(200);
      expect(first.data).toMatchObject({ id: 'acme-one', parentId: 'acme' });
      const second = await d.call('/api/iam/tenants/create', { id: 'acme-two', name: 'Two' }, admin);
      expect(second.error).toMatchObject({
        code: 'QUOTA_EXCEEDED',
        details: { limit: 'childTenantsPerTenant', max: 1 },
      });
      const elsewhere = await d.call(
        '/api/iam/tenants/create',
        { id: 'rogue', name: 'Rogue', parentId: 'root' },
        admin,
      );
      expect(elsewhere.status).toBe(403);
    });
  });
});
