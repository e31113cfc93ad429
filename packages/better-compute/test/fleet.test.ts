/**
 * Sites, projects, pools, drivers, nodes (state rules, labels, taints, delete, heartbeats and
 * offline), join tokens and requests, inventory, usage, and ifVersion CONFLICTs, through the handler.
 */
import { createHash } from 'node:crypto';
import { testDatabaseKinds } from '@better-compute/db/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unpackAnswer } from '../src/http/idempotency.js';
import { runFleetController } from '../src/modules/fleet/index.js';
import {
  ACME,
  addNode,
  createFleetDeployment,
  type FleetDeployment,
  GLOBEX,
  h100x8,
  l40sx4,
  seedPool,
} from './fleet-support.js';

const kinds = await testDatabaseKinds();
const HOUR = 3600;
const inventory = (gpus = l40sx4()) => ({ cpuCores: 32, memoryGiB: 256, gpus });

describe.each(kinds)('the fleet on %s', (kind) => {
  let d: FleetDeployment;
  beforeAll(async () => {
    d = await createFleetDeployment(kind);
  });
  afterAll(async () => d?.close());

  it('sites are created, updated with ifVersion (CONFLICT when it moved) and deleted once empty', async () => {
    const site = await d.api('sites.create', {
      name: 'fra-1',
      region: 'eu-central',
      labels: { tier: 'gold' },
    });
    expect(site).toMatchObject({ name: 'fra-1', version: 1, tenantId: 'root' });
    expect((await d.fails('sites.create', { name: 'fra-1' })).code).toBe('ALREADY_EXISTS');
    const updated = await d.api('sites.update', { siteId: site.id, description: 'Frankfurt', ifVersion: 1 });
    expect(updated.version).toBe(2);
    const conflict = await d.fails('sites.update', { siteId: site.id, description: 'again', ifVersion: 1 });
    expect(conflict).toMatchObject({ code: 'CONFLICT', details: { version: 2, ifVersion: 1 } });
    const pool = await d.api('pools.create', { siteId: site.id, name: 'fra-pool' });
    expect((await d.fails('sites.delete', { siteId: site.id })).code).toBe('INVALID_STATE');
    expect((await d.fails('sites.get', { siteId: site.id }, ACME)).code).toBe('NOT_FOUND');
    expect((await d.fails('sites.get', { siteId: 'site_nope' })).code).toBe('INVALID_ARGUMENT');
    await d.api('pools.archive', { poolId: pool.id });
    expect((await d.api('pools.get', { poolId: pool.id })).state).toBe('archived');
  });

  it.each([
    ['sites.list', 'root'],
    ['pools.list', 'root'],
    ['nodes.list', 'root'],
    ['joinTokens.list', 'root'],
    ['joinRequests.list', 'root'],
    ['projects.list', 'acme'],
    ['reservations.list', 'acme'],
    ['usage.list', 'acme'],
  ])('%s refuses a cursor it did not give instead of paging from nowhere', async (method, tenant) => {
    // Not an id at all, and an id of another kind.
    for (const cursor of ['garbage', 'inst_01k5w000000000000000000000']) {
      expect(await d.fails(method, { cursor }, tenant === 'acme' ? ACME : undefined)).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: 'cursor: must be a cursor from a previous page',
      });
    }
  });

  it('projects are created, listed and archived', async () => {
    const project = await d.api('projects.create', { name: 'llm-train' }, ACME);
    expect((await d.api('projects.list', {}, ACME)).items.map((p: { id: string }) => p.id)).toEqual([
      project.id,
    ]);
    const archived = await d.api('projects.archive', { projectId: project.id, ifVersion: 1 }, ACME);
    expect(archived).toMatchObject({ state: 'archived', version: 2 });
    expect((await d.fails('projects.get', { projectId: project.id }, GLOBEX)).code).toBe('NOT_FOUND');
  });

  it('drivers list shows the registered drivers; a pool names one of them', async () => {
    const drivers = await d.api('drivers.list', {}, ACME);
    expect(drivers.items.map((x: { name: string }) => x.name)).toEqual(['bcd', 'sim']);
    const site = await d.api('sites.create', { name: 'drv-site' });
    expect((await d.fails('pools.create', { siteId: site.id, name: 'x', driver: 'nope' })).code).toBe(
      'INVALID_ARGUMENT',
    );
    expect((await d.api('pools.create', { siteId: site.id, name: 'sim-pool', driver: 'sim' })).driver).toBe(
      'sim',
    );
  });

  it('a join token create retried with its key answers the same token, which the database keeps only sealed', async () => {
    const { poolId } = await seedPool(d, 'retry');
    const idempotencyKey = 'jt-retry-0123456789abcdef';
    const first = await d.api('joinTokens.create', { poolId, uses: 3, idempotencyKey });
    const again = await d.api('joinTokens.create', { poolId, uses: 3, idempotencyKey });
    // The same answer, key for key and in the same order.
    expect(JSON.stringify(again)).toBe(JSON.stringify(first));
    const minted = (await d.api('joinTokens.list', { poolId })).items;
    expect(minted.map((t: { id: string }) => t.id)).toEqual([first.joinToken.id]);
    // The kept answer names the token's id but holds its secret only sealed.
    const secret = first.token.split('.')[1];
    const kept = (await d.db
      .selectFrom('compute.idempotency_keys' as never)
      .select('answer' as never)
      .where('method' as never, '=', 'joinTokens.create' as never)
      .execute()) as { answer: Uint8Array }[];
    expect(kept).toHaveLength(1);
    const text = JSON.stringify(unpackAnswer(kept[0]!.answer));
    expect(text).toContain(first.joinToken.id);
    expect(text).not.toContain(secret);
    expect(text).toMatch(/"token":"sealed:v1:/);
    // Another input under the same key is refused; another key mints another token.
    expect((await d.fails('joinTokens.create', { poolId, uses: 4, idempotencyKey })).code).toBe('CONFLICT');
    const other = await d.api('joinTokens.create', {
      poolId,
      uses: 3,
      idempotencyKey: `${idempotencyKey}-2`,
    });
    expect(other.token).not.toBe(first.token);
    // The token answered by the retry is the one that works.
    const joined = await d.api(
      'nodes.join',
      { joinToken: again.token, hostname: 'gpu-retry', inventory: inventory() },
      '',
    );
    expect(joined).toMatchObject({ state: 'pending' });
    await d.api('joinRequests.reject', { joinRequestId: joined.joinRequestId, reason: 'a test machine' });
  });

  it('a machine joins through a join request, an approval, a claim and a heartbeat', async () => {
    const { poolId } = await seedPool(d, 'join');
    const minted = await d.api('joinTokens.create', { poolId, uses: 2, lifetimeSeconds: HOUR });
    expect(minted.token).toMatch(/^jtok_[0-9a-z]{26}\.[A-Za-z0-9_-]{43}$/);
    const [id, secret] = minted.token.split('.');
    const stored = (await d.db
      .selectFrom('compute.join_tokens' as never)
      .selectAll()
      .where('id' as never, '=', id as never)
      .executeTakeFirstOrThrow()) as { secret_hash: string };
    expect(stored.secret_hash).toBe(createHash('sha256').update(secret).digest('hex'));
    expect(JSON.stringify(await d.api('joinTokens.list', {}))).not.toContain(secret);
    const asked = await d.api(
      'nodes.join',
      { joinToken: minted.token, hostname: 'gpu-17', inventory: inventory() },
      '',
    );
    expect(asked).toMatchObject({ state: 'pending', nodeId: null, nodeCredential: null });
    const pending = await d.api('joinRequests.list', { state: 'pending' });
    expect(pending.items).toEqual([
      expect.objectContaining({ id: asked.joinRequestId, hostname: 'gpu-17', poolId }),
    ]);
    expect(
      (await d.api('nodes.claim', { joinRequestId: asked.joinRequestId, claimSecret: asked.claimSecret }, ''))
        .state,
    ).toBe('pending');
    const approved = await d.api('joinRequests.approve', {
      joinRequestId: asked.joinRequestId,
      labels: { rack: 'r1' },
    });
    expect(approved.state).toBe('approved');
    expect((await d.fails('joinRequests.approve', { joinRequestId: asked.joinRequestId })).code).toBe(
      'INVALID_STATE',
    );
    const claimed = await d.api(
      'nodes.claim',
      { joinRequestId: asked.joinRequestId, claimSecret: asked.claimSecret },
      '',
    );
    expect(claimed).toMatchObject({ state: 'approved', nodeId: approved.nodeId });
    expect(
      (
        await d.fails(
          'nodes.claim',
          { joinRequestId: asked.joinRequestId, claimSecret: asked.claimSecret },
          '',
        )
      ).code,
    ).toBe('UNAUTHENTICATED');
    expect((await d.api('nodes.get', { nodeId: approved.nodeId })).state).toBe('joining');
    const beat = await d.api('nodes.heartbeat', { nodeCredential: claimed.nodeCredential }, '');
    expect(beat).toMatchObject({ nodeId: approved.nodeId, state: 'ready', bindings: [] });
    expect((await d.api('nodes.get', { nodeId: approved.nodeId })).labels).toEqual({ rack: 'r1' });
    // A forged credential, a revoked token, a rejected request.
    expect(
      (await d.fails('nodes.heartbeat', { nodeCredential: `${approved.nodeId}.${'x'.repeat(43)}` }, '')).code,
    ).toBe('UNAUTHENTICATED');
    const second = await d.api(
      'nodes.join',
      { joinToken: minted.token, hostname: 'gpu-18', inventory: inventory() },
      '',
    );
    const rejected = await d.api('joinRequests.reject', {
      joinRequestId: second.joinRequestId,
      reason: 'unknown asset tag',
    });
    expect(rejected).toMatchObject({ state: 'rejected', reason: 'unknown asset tag' });
    expect(
      (
        await d.fails(
          'nodes.join',
          { joinToken: minted.token, hostname: 'gpu-19', inventory: inventory() },
          '',
        )
      ).code,
    ).toBe('UNAUTHENTICATED');
    const other = await d.api('joinTokens.create', { poolId });
    await d.api('joinTokens.revoke', { joinTokenId: other.joinToken.id });
    expect(
      (
        await d.fails(
          'nodes.join',
          { joinToken: other.token, hostname: 'gpu-20', inventory: inventory() },
          '',
        )
      ).code,
    ).toBe('UNAUTHENTICATED');
    // A pasted token is not an id.
    expect((await d.fails('joinTokens.revoke', { joinTokenId: other.token })).code).toBe('INVALID_ARGUMENT');
    const expiring = await d.api('joinTokens.create', { poolId, lifetimeSeconds: 60 });
    d.clock.advance(61);
    expect(
      (await d.api('joinTokens.list', {})).items.find((t: { id: string }) => t.id === expiring.joinToken.id)
        .state,
    ).toBe('expired');
    expect(
      (
        await d.fails(
          'nodes.join',
          { joinToken: expiring.token, hostname: 'gpu-21', inventory: inventory() },
          '',
        )
      ).code,
    ).toBe('UNAUTHENTICATED');
  });

  it('cordoned, draining and offline nodes receive nothing new; draining becomes drained when its last reservation ends', async () => {
    const { poolId } = await seedPool(d, 'states');
    const a = await addNode(d, poolId, 'st-a', l40sx4());
    const b = await addNode(d, poolId, 'st-b', l40sx4());
    const c = await addNode(d, poolId, 'st-c', l40sx4());
    const onA = await d.api('reservations.create', { poolId, gpus: 4, durationSeconds: HOUR }, ACME);
    const nodeOf = (r: { binding: { nodeId: string }[] }) => r.binding[0]!.nodeId;
    const first = nodeOf(onA);
    const rest = [a, b, c].filter((n) => n.nodeId !== first);
    const drained = await d.api('nodes.drain', { nodeId: first });
    expect(drained.state).toBe('draining');
    await d.api('nodes.cordon', { nodeId: rest[0]!.nodeId });
    const onLast = await d.api('reservations.create', { poolId, gpus: 2, durationSeconds: HOUR }, ACME);
    expect(nodeOf(onLast)).toBe(rest[1]!.nodeId);
    // rest[1] goes silent: offline, its reservation degraded, and no new work.
    d.clock.advance(120);
    for (const n of [a, b, c])
      if (n.nodeId !== rest[1]!.nodeId) await d.api('nodes.heartbeat', { nodeCredential: n.credential }, '');
    await runFleetController(d.db, d.clock.now());
    expect((await d.api('nodes.get', { nodeId: rest[1]!.nodeId })).state).toBe('offline');
    expect(await d.api('reservations.get', { reservationId: onLast.id }, ACME)).toMatchObject({
      health: 'degraded',
      binding: [expect.objectContaining({ nodeState: 'offline' })],
    });
    const nothing = await d.api('reservations.create', { poolId, gpus: 1, durationSeconds: HOUR }, ACME);
    expect(nothing.state).toBe('queued');
    const capacity = (await d.api('capacity.get', { poolId }, ACME)).items[0];
    expect(capacity).toMatchObject({ total: 12, reserved: 6, free: 0, unavailable: 6 });
    // The silent node comes back: the queued reservation starts there; the degraded one recovers.
    await d.api('nodes.heartbeat', { nodeCredential: rest[1]!.credential }, '');
    expect((await d.api('reservations.get', { reservationId: onLast.id }, ACME)).health).toBe('ok');
    expect((await d.api('reservations.get', { reservationId: nothing.id }, ACME)).state).toBe('active');
    await d.api('reservations.release', { reservationId: onA.id }, ACME);
    expect((await d.api('nodes.get', { nodeId: first })).state).toBe('drained');
    const typesOf = async () =>
      (await d.api('nodes.events', { nodeId: first })).items.map((e: { type: string }) => e.type);
    await expect
      .poll(typesOf, { timeout: 5000 })
      .toEqual(['node.joining', 'node.ready', 'node.draining', 'node.drained']);
    const uncordoned = await d.api('nodes.uncordon', { nodeId: first });
    expect(uncordoned.state).toBe('ready');
  });

  it('nodes are labeled and tainted with ifVersion; a NoSchedule taint keeps reservations off unless tolerated', async () => {
    const { poolId } = await seedPool(d, 'taint');
    const node = await addNode(d, poolId, 'tn-a', l40sx4());
    const before = await d.api('nodes.get', { nodeId: node.nodeId });
    const labeled = await d.api('nodes.label', {
      nodeId: node.nodeId,
      set: { zone: 'b', 'example.com/rack': '7' },
      ifVersion: before.version,
    });
    expect(labeled.labels).toEqual({ 'example.com/rack': '7', zone: 'b' });
    expect(
      (await d.fails('nodes.label', { nodeId: node.nodeId, set: { zone: 'c' }, ifVersion: before.version }))
        .code,
    ).toBe('CONFLICT');
    const tainted = await d.api('nodes.taint', { nodeId: node.nodeId, add: [{ key: 'maintenance' }] });
    expect(tainted.taints).toEqual([{ key: 'maintenance', value: '', effect: 'NoSchedule' }]);
    const blocked = await d.api('reservations.create', { poolId, gpus: 1, durationSeconds: HOUR }, ACME);
    expect(blocked.state).toBe('queued');
    await d.api('reservations.release', { reservationId: blocked.id }, ACME);
    const tolerated = await d.api(
      'reservations.create',
      {
        poolId,
        gpus: 1,
        durationSeconds: HOUR,
        tolerations: ['maintenance'],
        selector: 'zone = b, example.com/rack >= 5',
      },
      ACME,
    );
    expect(tolerated.state).toBe('active');
    await d.api('reservations.release', { reservationId: tolerated.id }, ACME);
  });

  it('delete removes only a retired or cordoned node that holds nothing; retire with force ends its reservations', async () => {
    const { poolId } = await seedPool(d, 'delete');
    const node = await addNode(d, poolId, 'del-a', l40sx4());
    expect((await d.fails('nodes.delete', { nodeId: node.nodeId })).code).toBe('INVALID_STATE');
    const held = await d.api('reservations.create', { poolId, gpus: 2, durationSeconds: HOUR }, ACME);
    expect((await d.fails('nodes.retire', { nodeId: node.nodeId })).code).toBe('INVALID_STATE');
    await d.api('nodes.cordon', { nodeId: node.nodeId });
    expect((await d.fails('nodes.delete', { nodeId: node.nodeId })).code).toBe('INVALID_STATE');
    const retired = await d.api('nodes.retire', { nodeId: node.nodeId, force: true });
    expect(retired.state).toBe('retired');
    expect(await d.api('reservations.get', { reservationId: held.id }, ACME)).toMatchObject({
      state: 'ended',
      endReason: 'node-retired',
    });
    expect((await d.fails('nodes.heartbeat', { nodeCredential: node.credential }, '')).code).toBe(
      'UNAUTHENTICATED',
    );
    expect(await d.api('nodes.delete', { nodeId: node.nodeId })).toEqual({ id: node.nodeId, deleted: true });
    expect((await d.fails('nodes.get', { nodeId: node.nodeId })).code).toBe('NOT_FOUND');
    expect((await d.fails('nodes.get', { nodeId: node.nodeId }, ACME)).code).toBe('NOT_FOUND');
  });

  it('inventory changes are recorded, diffed, and applied once the node is empty', async () => {
    const { poolId } = await seedPool(d, 'inv');
    const node = await addNode(d, poolId, 'inv-a', l40sx4());
    const held = await d.api('reservations.create', { poolId, gpus: 1, durationSeconds: HOUR }, ACME);
    const changed = { cpuCores: 32, memoryGiB: 256, gpus: l40sx4().slice(0, 3) };
    await d.api('nodes.heartbeat', { nodeCredential: node.credential, inventory: changed }, '');
    expect(await d.api('inventory.get', { nodeId: node.nodeId })).toMatchObject({
      revision: 2,
      applied: false,
    });
    const diff = await d.api('inventory.diff', { nodeId: node.nodeId });
    expect(diff.changes).toEqual([
      { path: 'cpuCores', kind: 'changed', before: 64, after: 32 },
      { path: 'memoryGiB', kind: 'changed', before: 512, after: 256 },
      { path: 'gpus[3]', kind: 'removed', before: expect.objectContaining({ index: 3 }), after: null },
    ]);
    await d.api('reservations.release', { reservationId: held.id }, ACME);
    await d.api('nodes.heartbeat', { nodeCredential: node.credential }, '');
    expect(await d.api('inventory.get', { nodeId: node.nodeId })).toMatchObject({
      revision: 2,
      applied: true,
    });
    expect((await d.api('nodes.get', { nodeId: node.nodeId })).gpuCount).toBe(3);
    expect(
      (await d.api('inventory.history', { nodeId: node.nodeId })).items.map(
        (r: { revision: number }) => r.revision,
      ),
    ).toEqual([2, 1]);
  });

  it('the controller runs as a job in the workers: a reservation expires at its end', async () => {
    const { poolId } = await seedPool(d, 'worker');
    const node = await addNode(d, poolId, 'w-l40s', l40sx4());
    const held = await d.api('reservations.create', { poolId, gpus: 1, durationSeconds: 120 }, ACME);
    d.clock.advance(121);
    await d.api('nodes.heartbeat', { nodeCredential: node.credential }, '');
    const workers = d.compute.startWorkers(['controllers']);
    try {
      await expect
        .poll(async () => (await d.api('reservations.get', { reservationId: held.id }, ACME)).state, {
          timeout: 10_000,
          interval: 200,
        })
        .toBe('ended');
      expect((await d.api('reservations.get', { reservationId: held.id }, ACME)).endReason).toBe('expired');
    } finally {
      await workers.stop();
    }
  });

  it('usage counts GPU-seconds per tenant, pool and model per hour, and exports csv and jsonl', async () => {
    const { poolId } = await seedPool(d, 'usage');
    const node = await addNode(d, poolId, 'use-a', h100x8('use-nvl'));
    const start = d.clock.now();
    const r = await d.api('reservations.create', { poolId, gpus: 2, durationSeconds: 2 * HOUR }, GLOBEX);
    d.clock.advance(HOUR + 1800);
    await d.api('nodes.heartbeat', { nodeCredential: node.credential }, '');
    await d.api('reservations.release', { reservationId: r.id }, GLOBEX);
    const from = new Date(start.getTime() - HOUR * 1000).toISOString();
    const to = new Date(start.getTime() + 3 * HOUR * 1000).toISOString();
    const mine = await d.api('usage.list', { from, to, poolId }, GLOBEX);
    expect(mine.items.reduce((s: number, u: { gpuSeconds: number }) => s + u.gpuSeconds, 0)).toBe(
      2 * (HOUR + 1800),
    );
    expect(
      mine.items.every(
        (u: { tenantId: string; gpuModel: string }) => u.tenantId === 'globex' && u.gpuModel === 'H100',
      ),
    ).toBe(true);
    expect((await d.api('usage.list', { from, to, poolId }, ACME)).items).toEqual([]);
    expect((await d.api('usage.list', { from, to, poolId })).items.length).toBe(mine.items.length);
    const csv = await d.api('usage.export', { from, to, poolId, format: 'csv' }, GLOBEX);
    expect(csv.content.split('\n')[0]).toBe('windowStart,windowEnd,tenantId,poolId,gpuModel,gpuSeconds');
    expect(csv.rows).toBe(mine.items.length);
    const jsonl = await d.api('usage.export', { from, to, poolId, format: 'jsonl' }, GLOBEX);
    expect(
      jsonl.content
        .trim()
        .split('\n')
        .map((l: string) => JSON.parse(l)),
    ).toEqual(mine.items);
  });
});
