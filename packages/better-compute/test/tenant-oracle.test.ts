/**
 * No tenant-existence oracle (issue 15): for a tenant the caller has nothing to do with, "does not
 * exist", "exists" and "is suspended" answer alike, in IAM (tenants.get, can) and in compute
 * (quotas.get on a pool the caller is only offered, acting in another tenant), with the real
 * embedded Better IAM.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { betterCompute, type ComputeInstance } from '../src/index.js';

const kinds = await testDatabaseKinds();

describe.each(kinds)('what a stranger learns of other tenants, on %s', (kind) => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  let acmeAdmin: string;
  let rootAdmin: string;
  let poolId: string;

  beforeAll(async () => {
    database = await createTestDatabase(kind);
    compute = await betterCompute({ database, rateLimit: false }, { log: () => {} });
    await compute.migrate();
    const dev = (await compute.embeddedIam!.bootstrapDev())!;
    acmeAdmin = dev.acmeAdmin.apiKey;
    rootAdmin = dev.rootAdmin.apiKey;
    await compute.embeddedIam!.createTenant({ id: 'globex', name: 'Globex' });
    await compute.embeddedIam!.createTenant({ id: 'initech', name: 'Initech' });
    await compute.embeddedIam!.suspendTenant('initech');
    const site = await call('/api/compute/sites/create', { name: 'oracle-site', region: 'r' }, rootAdmin);
    const pool = await call(
      '/api/compute/pools/create',
      { siteId: site.data.id, name: 'oracle', class: 'gpu' },
      rootAdmin,
    );
    poolId = pool.data.id;
    await call('/api/compute/pools/offer', { poolId, offerTenantId: 'acme' }, rootAdmin);
  }, 120_000);

  afterAll(async () => {
    await compute?.close();
    await database?.close();
  });

  async function call(path: string, body: Record<string, unknown>, token: string) {
    const response = await compute.handler(
      new Request(`http://localhost${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }),
    );
    return { status: response.status, ...((await response.json()) as { data?: any; error?: any }) };
  }

  /** The answer with the tenant's name and request ids taken out: what differs then is an oracle. */
  const shape = (answer: unknown, tenant: string) =>
    JSON.stringify(answer)
      .replaceAll(tenant, 'T')
      .replace(/"requestId":"[^"]+"/g, '');

  const probes: [string, (tenant: string) => [string, Record<string, unknown>]][] = [
    ['IAM tenants.get', (t) => ['/api/iam/tenants/get', { tenantId: t }]],
    [
      'IAM can, acting there',
      (t) => [
        '/api/iam/can/check',
        { tenantId: t, checks: [{ action: 'compute:reservations:create', resource: { type: 'tenant' } }] },
      ],
    ],
    [
      'IAM can, asking about it',
      (t) => [
        '/api/iam/can/check',
        { checks: [{ action: 'iam:tenants:get', resource: { type: 'iam-tenant', id: t, tenantId: t } }] },
      ],
    ],
    [
      'compute quotas.get of it, on an offered pool',
      (t) => ['/api/compute/quotas/get', { poolId, subjectTenantId: t }],
    ],
    ['compute, acting there', (t) => ['/api/compute/pools/list', { tenantId: t }]],
  ];

  it.each(probes)(
    '%s: a tenant that does not exist, one that does and a suspended one answer alike',
    async (_name, probe) => {
      const answers = await Promise.all(
        ['nosuch', 'globex', 'initech'].map(async (tenant) => {
          const [path, body] = probe(tenant);
          return shape(await call(path, body, acmeAdmin), tenant);
        }),
      );
      expect(answers[1]).toBe(answers[0]);
      expect(answers[2]).toBe(answers[0]);
    },
  );

  it('the pool’s owner (the platform) still gets NOT_FOUND for a mistyped tenant', async () => {
    const answer = await call(
      '/api/compute/quotas/get',
      { tenantId: 'root', poolId, subjectTenantId: 'nosuch' },
      rootAdmin,
    );
    expect(answer.error).toMatchObject({ code: 'NOT_FOUND', details: { field: 'subjectTenantId' } });
  });
});
