/**
 * Who an instance belongs to, with the real embedded Better IAM: it records the person that made
 * it and the agent when one acted for that person; an agent takes its person's place and no more
 * (an agent bound as a member cannot create one); a member reads instances but cannot stop them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { agentWithKey } from './iam-support.js';

describe('who an instance belongs to', () => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  const keys: Record<'admin' | 'member' | 'root' | 'adminAgent' | 'memberAgent', string> = {} as never;
  const ids: Record<'admin' | 'adminAgent', string> = {} as never;
  let input: Record<string, unknown>;

  async function call(path: string, body: Record<string, unknown>, token: string) {
    const response = await compute.handler(
      new Request(`http://localhost/api/compute/${path}`, {
        method: 'POST',
        headers: {
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          'content-type': 'application/json',
        },
        body: JSON.stringify(body),
      }),
    );
    return { status: response.status, ...((await response.json()) as { data?: any; error?: any }) };
  }

  beforeAll(async () => {
    database = await createTestDatabase('postgres');
    compute = await betterCompute({ database, rateLimit: false }, { log: () => {} });
    await compute.migrate();
    const iam = compute.embeddedIam!;
    const dev = (await iam.bootstrapDev())!;
    keys.admin = dev.acmeAdmin.apiKey;
    ids.admin = dev.acmeAdmin.principalId;
    keys.member = dev.acmeMember.apiKey;
    keys.root = dev.rootAdmin.apiKey;
    const agentFor = (principalId: string, role: string) =>
      agentWithKey(iam, {
        tenantId: 'acme',
        displayName: `agent of ${principalId}`,
        actingFor: principalId,
        role,
      });
    const adminAgent = await agentFor(ids.admin, 'tenant-admin');
    keys.adminAgent = adminAgent.key;
    ids.adminAgent = adminAgent.id;
    keys.memberAgent = (await agentFor(dev.acmeMember.principalId, 'member')).key;
    const root = (path: string, body: Record<string, unknown>) =>
      call(path, { tenantId: 'root', ...body }, keys.root);
    const site = await root('sites/create', { name: 'vps', region: 'r' });
    const pool = await root('pools/create', {
      siteId: site.data.id,
      name: 'vps',
      class: 'vps',
      driver: 'sim',
    });
    const poolId = pool.data.id;
    await root('pools/offer', { poolId, offerTenantId: 'acme' });
    const { data: token } = await root('joinTokens/create', { poolId, preApproved: true });
    const { data: joined } = await call(
      'nodes/join',
      { joinToken: token.token, hostname: 'vps-0', inventory: { cpuCores: 16, memoryGiB: 64, gpus: [] } },
      '',
    );
    await call('nodes/heartbeat', { nodeCredential: joined.nodeCredential }, '');
    const flavor = await root('flavors/create', {
      poolId,
      name: 'small',
      vcpus: 1,
      memoryMiB: 512,
      diskGiB: 2,
    });
    const image = await root('images/register', {
      name: 'base',
      source: '/srv/images/base.raw',
      diskFormat: 'raw',
      sha256: 'c'.repeat(64),
      sizeBytes: 1024,
      os: 'debian-12',
    });
    input = { tenantId: 'acme', poolId, flavorId: flavor.data.id, imageId: image.data.id };
  }, 120_000);

  afterAll(async () => {
    await compute?.close();
    await database?.close();
  });

  it('records the person that made it, and the agent that acted for the person', async () => {
    const own = await call('instances/create', { ...input, name: 'by-admin' }, keys.admin);
    expect(own.data).toMatchObject({ ownerId: ids.admin, agentId: null, state: 'provisioning' });
    const byAgent = await call('instances/create', { ...input, name: 'by-agent' }, keys.adminAgent);
    expect(byAgent.data).toMatchObject({ ownerId: ids.admin, agentId: ids.adminAgent });
  });

  it('an agent bound as a member, and a member, cannot create or stop one; both read them', async () => {
    for (const key of [keys.memberAgent, keys.member]) {
      const refused = await call('instances/create', { ...input, name: 'not-mine' }, key);
      expect(refused).toMatchObject({ status: 403, error: { code: 'ACCESS_DENIED' } });
      const listed = await call('instances/list', { tenantId: 'acme' }, key);
      expect(listed.data.items.length).toBeGreaterThanOrEqual(2);
      const target = listed.data.items[0].id;
      expect((await call('instances/stop', { tenantId: 'acme', instanceId: target }, key)).error.code).toBe(
        'ACCESS_DENIED',
      );
    }
  });

  it('without a credential or with a malformed one, nothing is read or made', async () => {
    const none = await compute.handler(
      new Request('http://localhost/api/compute/instances/list', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"tenantId":"acme"}',
      }),
    );
    expect(none.status).toBe(401);
    const junk = await call('instances/create', { ...input, name: 'x' }, `biam_${'x'.repeat(5000)}`);
    expect(junk).toMatchObject({ status: 401, error: { code: 'UNAUTHENTICATED' } });
    expect(
      (await call('instances/create', { ...input, name: 'x', tenantId: 'root' }, keys.admin)).error.code,
    ).toBe('ACCESS_DENIED');
  });
});
