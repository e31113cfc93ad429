/**
 * Site tokens on both databases: create answers the secret once (sealed for retries under the same
 * key), joining with it makes its site's agent (role site-agent, the system NoSchedule taint, so no
 * reservation lands on it), revoke closes it with its waiting requests; the join-token methods
 * neither list nor revoke a site token and the site-token methods never touch a join token;
 * another tenant's pool or token is refused and nothing changes.
 */
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { call, eventually, TestBridge } from './support.js';

const kinds = await testDatabaseKinds();
const ACME = 't-acme-alice';
const GLOBEX = 't-globex-bob';
const inventory = { cpuCores: 4, memoryGiB: 8, gpus: [] };

describe.each(kinds)('site tokens on %s', (kind) => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  let poolId: string;
  let siteId: string;
  let globexPool: string;

  async function api(method: string, body: Record<string, unknown>, token: string | null = ACME) {
    const { body: answer } = await call(compute, method, body, token ? { token } : {});
    if (answer.error) throw new Error(`${method}: ${answer.error.code} ${answer.error.message}`);
    return answer.data as any;
  }
  async function fails(method: string, body: unknown, token: string | null = ACME) {
    const { status, body: answer } = await call(compute, method, body, token ? { token } : {});
    if (!answer.error) throw new Error(`${method} succeeded: ${JSON.stringify(answer.data)}`);
    expect(status).toBeLessThan(500);
    return answer.error as { code: string; message: string; details?: Record<string, any> };
  }
  const tokenRows = async () =>
    Number(
      (await sql<{ n: string }>`select count(*) as n from compute.join_tokens`.execute(database.db)).rows[0]!
        .n,
    );

  beforeAll(async () => {
    database = await createTestDatabase(kind, 4);
    compute = await betterCompute(
      { database, iam: new TestBridge(), trustedOrigins: [], rateLimit: false },
      { log: () => {} },
    );
    await compute.migrate();
    siteId = (await api('sites.create', { name: 'dc-1' })).id;
    poolId = (await api('pools.create', { siteId, name: 'metal', class: 'gpu', driver: 'sim' })).id;
    const globexSite = await api('sites.create', { name: 'globex-dc' }, GLOBEX);
    globexPool = (
      await api('pools.create', { siteId: globexSite.id, name: 'g', class: 'gpu', driver: 'sim' }, GLOBEX)
    ).id;
  });
  afterAll(async () => {
    await compute?.close();
    await database?.close();
  });

  it('a site token joins its site’s agent: role site-agent, tainted NoSchedule by compute', async () => {
    const created = await api('siteTokens.create', {
      poolId,
      preApproved: true,
      idempotencyKey: 'site-token-1',
    });
    expect(created.siteToken).toMatchObject({
      poolId,
      siteId,
      usesAllowed: 1,
      usesLeft: 1,
      preApproved: true,
      state: 'active',
    });
    expect(created.siteToken.id).toMatch(/^stok_/);
    expect(created.token.startsWith(`${created.siteToken.id}.`)).toBe(true);
    // A retry with the same key answers the same token; nothing new is minted.
    const rows = await tokenRows();
    const again = await api('siteTokens.create', {
      poolId,
      preApproved: true,
      idempotencyKey: 'site-token-1',
    });
    expect(again.token).toBe(created.token);
    expect(await tokenRows()).toBe(rows);

    const joined = await api(
      'nodes.join',
      { joinToken: created.token, hostname: 'site-agent-1', inventory },
      null,
    );
    expect(joined.state).toBe('approved');
    const node = await api('nodes.get', { nodeId: joined.nodeId });
    expect(node.role).toBe('site-agent');
    expect(node.taints).toEqual([{ key: 'better-compute.io/site-agent', value: '', effect: 'NoSchedule' }]);
    // The agent's taint is compute's own: no operator removes it.
    const untaint = await fails('nodes.taint', {
      nodeId: node.id,
      remove: ['better-compute.io/site-agent'],
    });
    expect(untaint.code).toBe('INVALID_ARGUMENT');
    // Used up: the second join is refused.
    expect(
      (await fails('nodes.join', { joinToken: created.token, hostname: 'again', inventory }, null)).code,
    ).toBe('UNAUTHENTICATED');
    const events = await eventually(
      () => api('events.list', { type: 'siteToken.' }),
      (page) => page.items.length > 0,
    );
    expect(events.items.map((e: any) => [e.type, e.subject.id, e.data.siteId])).toEqual([
      ['siteToken.created', created.siteToken.id, siteId],
    ]);
    const audit = await database.db
      .selectFrom('compute.audit_events')
      .select(['method', 'outcome', 'action'])
      .where('method', '=', 'siteTokens.create')
      .execute();
    expect(audit).toContainEqual({
      method: 'siteTokens.create',
      outcome: 'allowed',
      action: 'compute:site-tokens:create',
    });
    // The secret is in no event or audit entry.
    const secret = created.token.split('.')[1];
    const everything = JSON.stringify([
      await database.db.selectFrom('compute.audit_events').selectAll().execute(),
      (await api('events.list', {})).items,
    ]);
    expect(everything).not.toContain(secret);
  });

  it('no reservation lands on a site agent, and no one tolerates its taint', async () => {
    const gpus = Array.from({ length: 4 }, (_, index) => ({
      index,
      model: 'L4',
      product: 'L4-24GB',
      vramGiB: 24,
      nvlinkDomain: null,
    }));
    const agentPool = (await api('pools.create', { siteId, name: 'agents-gpu', class: 'gpu', driver: 'sim' }))
      .id;
    const { token } = await api('siteTokens.create', { poolId: agentPool, preApproved: true });
    const joined = await api(
      'nodes.join',
      { joinToken: token, hostname: 'gpu-agent', inventory: { ...inventory, gpus } },
      null,
    );
    await api('nodes.heartbeat', { nodeCredential: joined.nodeCredential }, null);
    expect((await api('nodes.get', { nodeId: joined.nodeId })).state).toBe('ready');
    const reservation = await api('reservations.create', {
      poolId: agentPool,
      gpus: 1,
      durationSeconds: 3600,
    });
    expect(reservation.state).toBe('queued');
    const tolerated = await fails('reservations.create', {
      poolId: agentPool,
      gpus: 1,
      durationSeconds: 3600,
      tolerations: ['better-compute.io/site-agent'],
    });
    expect(tolerated.code).toBe('INVALID_ARGUMENT');
    await api('reservations.release', { reservationId: reservation.id });
  });

  it('no instance is placed on a site agent of a VPS pool', async () => {
    const vpsPool = (await api('pools.create', { siteId, name: 'agents-vps', class: 'vps', driver: 'sim' }))
      .id;
    const { token } = await api('siteTokens.create', { poolId: vpsPool, preApproved: true });
    const joined = await api(
      'nodes.join',
      { joinToken: token, hostname: 'vps-agent', inventory: { cpuCores: 16, memoryGiB: 64, gpus: [] } },
      null,
    );
    await api('nodes.heartbeat', { nodeCredential: joined.nodeCredential }, null);
    const flavor = await api('flavors.create', {
      poolId: vpsPool,
      name: 'small',
      vcpus: 1,
      memoryMiB: 512,
      diskGiB: 2,
    });
    const image = await api(
      'images.register',
      {
        name: 'base',
        source: '/srv/images/base.raw',
        diskFormat: 'raw',
        sha256: 'c'.repeat(64),
        sizeBytes: 1024,
        os: 'debian-12',
      },
      't-root-ops',
    );
    // No worker has room: the create is refused as a full pool is (UNAVAILABLE, retry later).
    const { body } = await call(
      compute,
      'instances.create',
      { poolId: vpsPool, flavorId: flavor.id, imageId: image.id, name: 'on-the-agent' },
      { token: ACME },
    );
    expect(body.error?.code).toBe('UNAVAILABLE');
    expect(body.error?.message).toContain(vpsPool);
    const placed = await sql<{ n: string }>`
      select count(*) as n from compute.instances where node_id = ${joined.nodeId}`.execute(database.db);
    expect(Number(placed.rows[0]!.n)).toBe(0);
  });

  it('a worker joined by a join token stays a worker', async () => {
    const { token } = await api('joinTokens.create', { poolId, preApproved: true });
    const joined = await api('nodes.join', { joinToken: token, hostname: 'worker-1', inventory }, null);
    const node = await api('nodes.get', { nodeId: joined.nodeId });
    expect(node.role).toBe('worker');
    expect(node.taints).toEqual([]);
  });

  it('an approved join request of a site token makes a site agent too', async () => {
    const { token } = await api('siteTokens.create', { poolId });
    const joined = await api('nodes.join', { joinToken: token, hostname: 'site-agent-2', inventory }, null);
    expect(joined.state).toBe('pending');
    const approved = await api('joinRequests.approve', { joinRequestId: joined.joinRequestId });
    expect((await api('nodes.get', { nodeId: approved.nodeId })).role).toBe('site-agent');
  });

  it('revoke closes the token and its waiting requests; kinds never cross', async () => {
    const { siteToken, token } = await api('siteTokens.create', { poolId, uses: 2 });
    const waiting = await api('nodes.join', { joinToken: token, hostname: 'site-agent-3', inventory }, null);
    const joinToken = (await api('joinTokens.create', { poolId })).joinToken;
    // Neither method group sees the other's tokens.
    expect(
      (await fails('joinTokens.revoke', { joinTokenId: joinToken.id.replace('jtok', 'stok') })).code,
    ).toBe('INVALID_ARGUMENT');
    expect(
      (await fails('siteTokens.revoke', { siteTokenId: siteToken.id.replace('stok', 'jtok') })).code,
    ).toBe('INVALID_ARGUMENT');
    const listed = await api('joinTokens.list', { limit: 100 });
    expect(listed.items.every((t: any) => t.id.startsWith('jtok_'))).toBe(true);
    expect(listed.items.map((t: any) => t.id)).toContain(joinToken.id);

    const revoked = await api('siteTokens.revoke', { siteTokenId: siteToken.id });
    expect(revoked).toMatchObject({ id: siteToken.id, siteId, state: 'revoked' });
    expect((await api('joinRequests.list', { state: 'rejected' })).items.map((r: any) => r.id)).toContain(
      waiting.joinRequestId,
    );
    expect((await fails('nodes.join', { joinToken: token, hostname: 'late', inventory }, null)).code).toBe(
      'UNAUTHENTICATED',
    );
    const events = await eventually(
      () => api('events.list', { type: 'siteToken.revoked' }),
      (page) => page.items.length > 0,
    );
    expect(events.items[0]).toMatchObject({
      subject: { type: 'siteToken', id: siteToken.id },
      data: { poolId, reason: 'site token revoked' },
    });
    // The join token is untouched.
    expect((await api('joinTokens.list', {})).items.find((t: any) => t.id === joinToken.id).state).toBe(
      'active',
    );
  });

  it('bad input and other tenants are refused, and nothing changes', async () => {
    const before = await tokenRows();
    expect((await fails('siteTokens.create', { poolId: globexPool })).code).toMatch(
      /NOT_FOUND|ACCESS_DENIED/,
    );
    expect((await fails('siteTokens.create', { poolId: 'pool_x\u0000' })).code).toBe('INVALID_ARGUMENT');
    expect((await fails('siteTokens.create', { poolId, uses: 101 })).code).toBe('INVALID_ARGUMENT');
    expect((await fails('siteTokens.create', { poolId, description: 'x'.repeat(501) })).code).toBe(
      'INVALID_ARGUMENT',
    );
    expect((await fails('siteTokens.create', { poolId, description: 'x'.repeat(2_000_000) })).code).toBe(
      'PAYLOAD_TOO_LARGE',
    );
    expect((await fails('siteTokens.create', { poolId }, null)).code).toBe('UNAUTHENTICATED');
    const mine = await api('siteTokens.create', { poolId });
    expect((await fails('siteTokens.revoke', { siteTokenId: mine.siteToken.id }, GLOBEX)).code).toBe(
      'NOT_FOUND',
    );
    // A pasted token is not an id.
    expect((await fails('siteTokens.revoke', { siteTokenId: mine.token })).code).toBe('INVALID_ARGUMENT');
    expect(await tokenRows()).toBe(before + 1);
    expect((await api('siteTokens.revoke', { siteTokenId: mine.siteToken.id })).state).toBe('revoked');
  });
});
