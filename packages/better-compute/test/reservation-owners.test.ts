/**
 * Reservations have an owner (issue 15): they record the person (or service account) that made
 * them, and the agent when one acted for a person; a member extends and releases its own, and ending
 * someone else's takes an action tenant administrators and operators hold. Lists show the owner and
 * `--mine` keeps the caller's own. With the real embedded Better IAM.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { captureIO, cliLending } from './cli-support.js';
import { agentWithKey } from './iam-support.js';

const kinds = await testDatabaseKinds();

describe.each(kinds)('who may end a reservation, on %s', (kind) => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  const keys: Record<'alice' | 'bob' | 'admin' | 'operator' | 'agent' | 'root', string> = {} as never;
  const ids: Record<'alice' | 'agent', string> = {} as never;
  let poolId: string;

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
  const reserve = async (token: string) => {
    const answer = await call('reservations/create', { poolId, gpus: 1, durationSeconds: 3600 }, token);
    expect(answer.error).toBeUndefined();
    return answer.data;
  };

  beforeAll(async () => {
    database = await createTestDatabase(kind);
    compute = await betterCompute({ database, rateLimit: false }, { log: () => {} });
    await compute.migrate();
    const iam = compute.embeddedIam!;
    const dev = (await iam.bootstrapDev())!;
    keys.alice = dev.acmeMember.apiKey;
    ids.alice = dev.acmeMember.principalId;
    keys.admin = dev.acmeAdmin.apiKey;
    keys.root = dev.rootAdmin.apiKey;
    const person = async (email: string, role: string) => {
      const p = await iam.createPerson({ tenantId: 'acme', email, password: 'correct horse battery' });
      await iam.createBinding({ tenantId: 'acme', role, principalId: p.id });
      return (await iam.createApiKey(p.id, { name: 'k' })).key;
    };
    keys.bob = await person('bob@acme.test', 'member');
    keys.operator = await person('ops@acme.test', 'operator');
    const agent = await agentWithKey(iam, {
      tenantId: 'acme',
      displayName: 'alice’s agent',
      actingFor: ids.alice,
      role: 'member',
    });
    keys.agent = agent.key;
    ids.agent = agent.id;
    const site = await call('sites/create', { tenantId: 'root', name: 'owners', region: 'r' }, keys.root);
    const pool = await call(
      'pools/create',
      { tenantId: 'root', siteId: site.data.id, name: 'owners', class: 'gpu' },
      keys.root,
    );
    poolId = pool.data.id;
    await call('pools/offer', { tenantId: 'root', poolId, offerTenantId: 'acme' }, keys.root);
    // One machine of 8 GPUs joins through the real flow; reservations past 8 GPUs queue.
    const { data: token } = await call(
      'joinTokens/create',
      { tenantId: 'root', poolId, preApproved: true },
      keys.root,
    );
    const gpus = Array.from({ length: 8 }, (_, index) => ({
      index,
      model: 'H100',
      product: 'H100-SXM5-80GB',
      vramGiB: 80,
    }));
    const { data: joined } = await call(
      'nodes/join',
      { joinToken: token.token, hostname: 'gpu-0', inventory: { cpuCores: 64, memoryGiB: 512, gpus } },
      '',
    );
    await call('nodes/heartbeat', { nodeCredential: joined.nodeCredential }, '');
  }, 120_000);

  afterAll(async () => {
    await compute?.close();
    await database?.close();
  });

  it('records its owner, and the agent that acted for the owner', async () => {
    const own = await reserve(keys.alice);
    expect(own).toMatchObject({ ownerId: ids.alice, agentId: null });
    const byAgent = await reserve(keys.agent);
    expect(byAgent).toMatchObject({ ownerId: ids.alice, agentId: ids.agent });
  });

  it('a member extends and releases its own, not a colleague’s; administrators and operators end anyone’s', async () => {
    const alices = await reserve(keys.alice);
    for (const [path, body] of [
      ['reservations/extend', { reservationId: alices.id, bySeconds: 600 }],
      ['reservations/release', { reservationId: alices.id }],
    ] as const) {
      const refused = await call(path, body, keys.bob);
      expect(refused.status, path).toBe(403);
      expect(refused.error.code).toBe('ACCESS_DENIED');
      expect(refused.error.details.reason).toContain('own resources');
    }
    const extended = await call(
      'reservations/extend',
      { reservationId: alices.id, bySeconds: 600 },
      keys.alice,
    );
    expect(extended.error).toBeUndefined();
    // Alice's agent acts for her: her reservations are its to end too.
    expect(
      (await call('reservations/extend', { reservationId: alices.id, bySeconds: 600 }, keys.agent)).status,
    ).toBe(200);
    const bobs = await reserve(keys.bob);
    expect((await call('reservations/release', { reservationId: bobs.id }, keys.admin)).data.state).toBe(
      'ended',
    );
    const another = await reserve(keys.bob);
    expect(
      (await call('reservations/release', { reservationId: another.id }, keys.operator)).data.state,
    ).toBe('ended');
    expect((await call('reservations/release', { reservationId: alices.id }, keys.alice)).data.state).toBe(
      'ended',
    );
  });

  it('an unknown reservation is NOT_FOUND for its would-be owner and a stranger alike', async () => {
    const missing = 'rsv_01m00000000000000000000000';
    for (const key of [keys.alice, keys.bob])
      expect((await call('reservations/release', { reservationId: missing }, key)).status).toBe(403);
    expect((await call('reservations/release', { reservationId: missing }, keys.admin)).error.code).toBe(
      'NOT_FOUND',
    );
  });

  it('lists show the owner, and --mine keeps the caller’s own', async () => {
    const bobs = await reserve(keys.bob);
    const mine = await call('reservations/list', { mine: true, limit: 100 }, keys.alice);
    expect(mine.data.items.length).toBeGreaterThan(0);
    expect(mine.data.items.every((r: { ownerId: string }) => r.ownerId === ids.alice)).toBe(true);
    expect(mine.data.items.some((r: { id: string }) => r.id === bobs.id)).toBe(false);
    // The agent's --mine is its person's.
    const agents = await call('reservations/list', { mine: true, limit: 100 }, keys.agent);
    expect(agents.data.items.map((r: { id: string }) => r.id)).toEqual(
      mine.data.items.map((r: { id: string }) => r.id),
    );

    const { io, out } = captureIO({ BETTER_COMPUTE_TOKEN: keys.bob, BETTER_COMPUTE_TENANT: 'acme' });
    await cliLending(() => compute).run(['reservations', 'list', '--mine', '--format', 'json'], io);
    const printed = JSON.parse(out.join('\n')) as { items: { id: string; ownerId: string }[] };
    expect(printed.items.map((r) => r.id)).toContain(bobs.id);
    expect(printed.items.every((r) => r.ownerId !== ids.alice)).toBe(true);
  });
});
