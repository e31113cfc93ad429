/**
 * Offers are accepted, not pushed (issue 15): a pool another tenant offers appears in a tenant's
 * list, and takes its reservations, only once one of its administrators accepts; the platform's
 * offers stand at once. With the real embedded Better IAM, through the handler and the CLI.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { captureIO, cliLending } from './cli-support.js';

const kinds = await testDatabaseKinds();

describe.each(kinds)('offers between tenants, on %s', (kind) => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  const keys: Record<'acme' | 'globex' | 'globexMember' | 'root', string> = {} as never;

  async function call(path: string, body: Record<string, unknown>, token: string) {
    const response = await compute.handler(
      new Request(`http://localhost/api/compute/${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }),
    );
    return { status: response.status, ...((await response.json()) as { data?: any; error?: any }) };
  }
  const poolIds = async (token: string) =>
    (await call('pools/list', {}, token)).data.items.map((p: { id: string }) => p.id);

  beforeAll(async () => {
    database = await createTestDatabase(kind);
    compute = await betterCompute({ database, rateLimit: false }, { log: () => {} });
    await compute.migrate();
    const iam = compute.embeddedIam!;
    const dev = (await iam.bootstrapDev())!;
    keys.acme = dev.acmeAdmin.apiKey;
    keys.root = dev.rootAdmin.apiKey;
    await iam.createTenant({ id: 'globex', name: 'Globex' });
    const person = async (email: string, role: string) => {
      const p = await iam.createPerson({ tenantId: 'globex', email, password: 'correct horse battery' });
      await iam.createBinding({ tenantId: 'globex', role, principalId: p.id });
      return (await iam.createApiKey(p.id, { name: 'k' })).key;
    };
    keys.globex = await person('admin@globex.test', 'tenant-admin');
    keys.globexMember = await person('member@globex.test', 'member');
  }, 120_000);

  afterAll(async () => {
    await compute?.close();
    await database?.close();
  });

  async function acmePool(name: string) {
    const site = await call('sites/create', { name: `${name}-site`, region: 'r' }, keys.acme);
    return (
      await call(
        'pools/create',
        { siteId: site.data.id, name, class: 'gpu', description: 'Totally the platform’s pool' },
        keys.acme,
      )
    ).data;
  }

  it('a tenant’s offer waits: not in the offered tenant’s list, not reservable, until accepted', async () => {
    const pool = await acmePool('pushed');
    const offered = await call('pools/offer', { poolId: pool.id, offerTenantId: 'globex' }, keys.acme);
    expect(offered.data).toMatchObject({ offeredTo: [], offerPending: ['globex'] });
    expect(await poolIds(keys.globex)).not.toContain(pool.id);
    const reserve = await call(
      'reservations/create',
      { poolId: pool.id, gpus: 1, durationSeconds: 3600 },
      keys.globex,
    );
    expect(reserve.error.code).toBe('NOT_FOUND');
    expect((await call('offers/list', { state: 'pending' }, keys.globex)).data.items).toEqual([
      expect.objectContaining({ poolId: pool.id, ownerTenantId: 'acme', state: 'pending' }),
    ]);
    // A member of globex may see the offer but not accept it.
    const byMember = await call('offers/accept', { poolId: pool.id }, keys.globexMember);
    expect(byMember.error.code).toBe('ACCESS_DENIED');

    expect((await call('offers/accept', { poolId: pool.id }, keys.globex)).data).toEqual({
      poolId: pool.id,
      state: 'accepted',
    });
    expect(await poolIds(keys.globex)).toContain(pool.id);
    expect((await call('pools/get', { poolId: pool.id }, keys.acme)).data).toMatchObject({
      offeredTo: ['globex'],
      offerPending: [],
    });
    // Accepting again changes nothing.
    expect((await call('offers/accept', { poolId: pool.id }, keys.globex)).data.state).toBe('accepted');
  });

  it('a declined offer is gone; an answer to no offer is NOT_FOUND', async () => {
    const pool = await acmePool('declined');
    await call('pools/offer', { poolId: pool.id, offerTenantId: 'globex' }, keys.acme);
    expect((await call('offers/decline', { poolId: pool.id }, keys.globex)).data).toEqual({
      poolId: pool.id,
      state: 'declined',
    });
    expect(await poolIds(keys.globex)).not.toContain(pool.id);
    expect((await call('offers/accept', { poolId: pool.id }, keys.globex)).error.code).toBe('NOT_FOUND');
    expect((await call('pools/get', { poolId: pool.id }, keys.acme)).data.offerPending).toEqual([]);
  });

  it('the owner withdraws a pending offer with unoffer', async () => {
    const pool = await acmePool('withdrawn');
    await call('pools/offer', { poolId: pool.id, offerTenantId: 'globex' }, keys.acme);
    const withdrawn = await call('pools/unoffer', { poolId: pool.id, offerTenantId: 'globex' }, keys.acme);
    expect(withdrawn.data.offerPending).toEqual([]);
    expect(
      (await call('offers/list', {}, keys.globex)).data.items.map((o: { poolId: string }) => o.poolId),
    ).not.toContain(pool.id);
  });

  it('the platform’s offers stand at once', async () => {
    const site = await call('sites/create', { tenantId: 'root', name: 'platform', region: 'r' }, keys.root);
    const pool = await call(
      'pools/create',
      { tenantId: 'root', siteId: site.data.id, name: 'platform', class: 'gpu' },
      keys.root,
    );
    const offered = await call(
      'pools/offer',
      { tenantId: 'root', poolId: pool.data.id, offerTenantId: 'globex' },
      keys.root,
    );
    expect(offered.data).toMatchObject({ offeredTo: ['globex'], offerPending: [] });
    expect(await poolIds(keys.globex)).toContain(pool.data.id);
  });

  it('offers list, accept and decline through the CLI', async () => {
    const pool = await acmePool('by-cli');
    await call('pools/offer', { poolId: pool.id, offerTenantId: 'globex' }, keys.acme);
    const cli = cliLending(() => compute);
    const env = { BETTER_COMPUTE_TOKEN: keys.globex, BETTER_COMPUTE_TENANT: 'globex' };
    const listed = captureIO(env);
    await cli.run(['offers', 'list', '--state', 'pending', '--format', 'json'], listed.io);
    expect(JSON.parse(listed.out.join('\n')).items.map((o: { poolId: string }) => o.poolId)).toContain(
      pool.id,
    );
    const accepted = captureIO(env);
    await cli.run(['offers', 'accept', pool.id], accepted.io);
    expect(JSON.parse(accepted.out.join('\n'))).toEqual({ poolId: pool.id, state: 'accepted' });
  });
});
