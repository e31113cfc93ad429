/**
 * The guide's Capacity flows through compute.handler: pools list, capacity, preview, reserve with
 * and without --nvlink, queueing and activation on release, extend, release and expiry on an
 * injected clock; quotas; idempotent reserves.
 */
import { testDatabaseKinds } from '@better-compute/db/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runFleetController } from '../src/modules/fleet/index.js';
import {
  a100x8,
  ACME,
  addNode,
  createFleetDeployment,
  type FleetDeployment,
  gb200x4,
  GLOBEX,
  h100x8,
  l40sx4,
  seedPool,
} from './fleet-support.js';

const kinds = await testDatabaseKinds();
const HOUR = 3600;

describe.each(kinds)('reservations on %s', (kind) => {
  let d: FleetDeployment;
  beforeAll(async () => {
    d = await createFleetDeployment(kind);
  });
  afterAll(async () => d?.close());

  /** A pool with one H100 node (one domain of 8), one A100 node (two domains of 4) and one L40S node. */
  async function mixedPool(name: string) {
    const { poolId } = await seedPool(d, name);
    const h100 = await addNode(d, poolId, `${name}-h100`, h100x8(`${name}-nvl-h`), { zone: 'a' });
    const a100 = await addNode(d, poolId, `${name}-a100`, a100x8(`${name}-nvl-a0`, `${name}-nvl-a1`), {
      zone: 'b',
    });
    const l40s = await addNode(d, poolId, `${name}-l40s`, l40sx4(), { zone: 'b' });
    return { poolId, h100: h100.nodeId, a100: a100.nodeId, l40s: l40s.nodeId };
  }

  it('pools list shows the owner its pools and a tenant the pools offered to it', async () => {
    const { poolId } = await seedPool(d, 'listed');
    const own = await d.api('pools.list', {});
    expect(own.items.find((p: { id: string }) => p.id === poolId)).toMatchObject({
      access: 'owner',
      offeredTo: ['acme', 'globex'],
      class: 'gpu',
    });
    const offered = await d.api('pools.list', {}, ACME);
    expect(offered.items.find((p: { id: string }) => p.id === poolId)).toMatchObject({
      access: 'offered',
      offeredTo: [],
    });
    await d.api('pools.unoffer', { poolId, offerTenantId: 'acme' });
    const after = await d.api('pools.list', {}, ACME);
    expect(after.items.map((p: { id: string }) => p.id)).not.toContain(poolId);
    expect(
      (await d.fails('reservations.create', { poolId, gpus: 1, durationSeconds: HOUR }, ACME)).code,
    ).toBe('NOT_FOUND');
  });

  it('capacity counts total, reserved, free and unavailable GPUs per pool and model', async () => {
    const { poolId, l40s } = await mixedPool('cap');
    await d.api('reservations.create', { poolId, gpus: 2, durationSeconds: HOUR, gpuModel: 'H100' }, ACME);
    await d.api('nodes.cordon', { nodeId: l40s });
    const { items } = await d.api('capacity.get', { poolId }, ACME);
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({
      poolId,
      total: 20,
      reserved: 2,
      free: 14,
      unavailable: 4,
      queuedReservations: 0,
    });
    expect(items[0].models).toEqual([
      { gpuModel: 'A100', total: 8, reserved: 0, free: 8, unavailable: 0 },
      { gpuModel: 'H100', total: 8, reserved: 2, free: 6, unavailable: 0 },
      { gpuModel: 'L40S', total: 4, reserved: 0, free: 0, unavailable: 4 },
    ]);
  });

  it('reserve --nvlink puts every GPU in one NVLink domain, best fit first', async () => {
    const { poolId, h100, a100 } = await mixedPool('nvl');
    const four = await d.api(
      'reservations.create',
      { poolId, gpus: 4, durationSeconds: HOUR, nvlink: true },
      ACME,
    );
    // A domain of 4 on the A100 node fits exactly; the H100's domain of 8 stays whole.
    expect(four.binding).toEqual([
      expect.objectContaining({ nodeId: a100, gpuIndices: [0, 1, 2, 3], nvlinkDomain: 'nvl-nvl-a0' }),
    ]);
    const eight = await d.api(
      'reservations.create',
      { poolId, gpus: 8, durationSeconds: HOUR, nvlink: true },
      ACME,
    );
    expect(eight.binding).toEqual([
      expect.objectContaining({ nodeId: h100, gpuIndices: [0, 1, 2, 3, 4, 5, 6, 7] }),
    ]);
    // Without --nvlink, 6 GPUs spread over nodes; with it, no domain holds 6 now: queued.
    const queued = await d.api(
      'reservations.create',
      { poolId, gpus: 6, durationSeconds: HOUR, nvlink: true },
      ACME,
    );
    expect(queued).toMatchObject({ state: 'queued', queuePosition: 1, binding: [] });
    await d.api('reservations.release', { reservationId: queued.id }, ACME);
  });

  it('reserve without --nvlink: best fit on one node, across its domains when it has several', async () => {
    const { poolId, h100, a100, l40s } = await mixedPool('fit');
    // The H100 node (8 in one domain) would tie with the A100 node and win on age: out of the way.
    await d.api('nodes.cordon', { nodeId: h100 });
    // The statements a call sends, begin, commit and the reserve's savepoint (sent with the pick) apart.
    const sentBy = async <T>(run: () => Promise<T>): Promise<[T, string[]]> => {
      d.statements.length = 0;
      const answer = await run();
      const control = /^(\/\* sent with commit \*\/ )?(begin|commit|savepoint \w+)$/i;
      return [answer, d.statements.filter((text) => !control.test(text.trim()))];
    };
    // Best fit for 3 is the 4-GPU L40S node: one group, picked and bound by one statement, then the
    // call's record.
    const [three, sentForThree] = await sentBy(() =>
      d.api('reservations.create', { poolId, gpus: 3, durationSeconds: HOUR }, ACME),
    );
    expect(three).toMatchObject({ state: 'active', version: 2 });
    expect(three.binding).toEqual([expect.objectContaining({ nodeId: l40s, gpuIndices: [0, 1, 2] })]);
    expect(sentForThree).toHaveLength(2);
    expect(sentForThree[0]).toContain('pick as');
    // 6 go to the A100 node (two domains of 4): one node, so one entry, in no single domain. The
    // one statement writes nothing for a node of several groups; the node is then placed apart.
    const [six, sentForSix] = await sentBy(() =>
      d.api('reservations.create', { poolId, gpus: 6, durationSeconds: HOUR }, ACME),
    );
    expect(six.binding).toEqual([
      expect.objectContaining({ nodeId: a100, gpuIndices: [0, 1, 2, 3, 4, 5], nvlinkDomain: null }),
    ]);
    expect(sentForSix.length).toBeGreaterThan(2);
    // 2 fits the A100's last two exactly, in its second domain.
    const two = await d.api('reservations.create', { poolId, gpus: 2, durationSeconds: HOUR }, ACME);
    expect(two.binding).toEqual([expect.objectContaining({ nodeId: a100, gpuIndices: [6, 7] })]);
    const capacity = await d.api('capacity.get', { poolId }, ACME);
    expect(capacity.items[0]).toMatchObject({ total: 20, reserved: 11, free: 1, unavailable: 8 });
    for (const r of [three, six, two]) await d.api('reservations.release', { reservationId: r.id }, ACME);
    await d.api('nodes.uncordon', { nodeId: h100 });
    const after = await d.api('capacity.get', { poolId }, ACME);
    expect(after.items[0]).toMatchObject({ reserved: 0, free: 20, unavailable: 0 });
    // Whatever the path, every reservation was recorded as created and activated. A reader sees an
    // event once every transaction that began before it has ended (docs/decisions/0002), and a
    // worker's may still be open on PostgreSQL: the list is read again until they show.
    const activated = async () =>
      (await d.api('events.list', { type: 'reservation.activated', limit: 100 }, ACME)).items.map(
        (e: { subject: { id: string } }) => e.subject.id,
      );
    await expect
      .poll(activated, { timeout: 5_000, interval: 50 })
      .toEqual(expect.arrayContaining([three.id, six.id, two.id]));
  });

  it('a rack-scale NVLink domain spans nodes', async () => {
    const { poolId } = await seedPool(d, 'rack');
    for (let i = 0; i < 18; i++)
      await addNode(d, poolId, `rack-${String(i).padStart(2, '0')}`, gb200x4('rack-1'));
    const big = await d.api(
      'reservations.create',
      { poolId, gpus: 16, durationSeconds: HOUR, nvlink: true },
      ACME,
    );
    expect(big.state).toBe('active');
    expect(big.binding).toHaveLength(4);
    expect(new Set(big.binding.map((b: { nvlinkDomain: string }) => b.nvlinkDomain))).toEqual(
      new Set(['rack-1']),
    );
    expect(big.binding.flatMap((b: { gpuIndices: number[] }) => b.gpuIndices)).toHaveLength(16);
  });

  it('preview says where a request fits now, or when it could start', async () => {
    const { poolId, h100 } = await mixedPool('preview');
    const fits = await d.api(
      'capacity.preview',
      { poolId, gpus: 8, durationSeconds: 86_400, selector: 'vramGiB >= 80' },
      ACME,
    );
    expect(fits).toMatchObject({
      fits: true,
      placement: [{ nodeId: h100, gpuIndices: [0, 1, 2, 3, 4, 5, 6, 7] }],
      queuedAhead: 0,
    });
    const held = await d.api(
      'reservations.create',
      { poolId, gpus: 8, durationSeconds: 2 * HOUR, gpuProduct: 'H100-SXM5-80GB' },
      GLOBEX,
    );
    const later = await d.api(
      'capacity.preview',
      { poolId, gpus: 8, durationSeconds: 86_400, selector: 'vramGiB >= 80' },
      ACME,
    );
    expect(later).toMatchObject({ fits: false, placement: null, earliestStartAt: held.endsAt });
    const never = await d.api(
      'capacity.preview',
      { poolId, gpus: 9, durationSeconds: HOUR, nvlink: true },
      ACME,
    );
    expect(never).toMatchObject({ fits: false, earliestStartAt: null });
  });

  it('a request that does not fit is queued in order and activated when GPUs free', async () => {
    const { poolId } = await seedPool(d, 'queue');
    await addNode(d, poolId, 'q-h100', h100x8('q-nvl'));
    const first = await d.api('reservations.create', { poolId, gpus: 6, durationSeconds: HOUR }, ACME);
    const second = await d.api('reservations.create', { poolId, gpus: 4, durationSeconds: HOUR }, GLOBEX);
    const third = await d.api('reservations.create', { poolId, gpus: 4, durationSeconds: 2 * HOUR }, ACME);
    expect([first.state, second.state, third.state]).toEqual(['active', 'queued', 'queued']);
    expect([second.queuePosition, third.queuePosition]).toEqual([1, 2]);
    // Backfill: a short request that ends before the head could start runs now (2 GPUs free).
    const short = await d.api('reservations.create', { poolId, gpus: 2, durationSeconds: 1800 }, ACME);
    expect(short.state).toBe('active');
    // One that would outlast the head's start waits behind it.
    const long = await d.api('reservations.create', { poolId, gpus: 1, durationSeconds: 3 * HOUR }, ACME);
    expect(long.state).toBe('queued');
    const released = await d.api('reservations.release', { reservationId: first.id }, ACME);
    expect(released).toMatchObject({ state: 'ended', endReason: 'released' });
    expect((await d.api('reservations.get', { reservationId: second.id }, GLOBEX)).state).toBe('active');
    expect((await d.api('reservations.get', { reservationId: third.id }, ACME)).state).toBe('queued');
    // The outbox shows a transaction's events once every older transaction of the server has ended.
    const typesOf = async () =>
      (await d.api('events.list', { type: 'reservation.', limit: 500 }, GLOBEX)).items
        .filter((e: { subject: { id: string } }) => e.subject.id === second.id)
        .map((e: { type: string }) => e.type);
    await expect
      .poll(typesOf, { timeout: 5000 })
      .toEqual(['reservation.created', 'reservation.queued', 'reservation.activated']);
    for (const r of [second]) await d.api('reservations.release', { reservationId: r.id }, GLOBEX);
    for (const r of [third, short, long]) await d.api('reservations.release', { reservationId: r.id }, ACME);
  });

  it('release: a stale version, another tenant, twice, and a reservation across nodes', async () => {
    const { poolId } = await seedPool(d, 'releases');
    const one = await addNode(d, poolId, 'r-l40s-1', l40sx4());
    const two = await addNode(d, poolId, 'r-l40s-2', l40sx4());
    const held = await d.api('reservations.create', { poolId, gpus: 2, durationSeconds: HOUR }, ACME);
    // The node and its daemon see who holds which GPU.
    const [bound] = held.binding;
    const node = [one, two].find((n) => n.nodeId === bound.nodeId)!;
    const holders = async () =>
      (await d.api('nodes.get', { nodeId: bound.nodeId })).gpus
        .filter((g: { reservationId: string | null }) => g.reservationId === held.id)
        .map((g: { index: number }) => g.index);
    expect(await holders()).toEqual(bound.gpuIndices);
    const beat = await d.api('nodes.heartbeat', { nodeCredential: node.credential }, '');
    expect(beat.bindings).toEqual([
      { reservationId: held.id, gpuIndices: bound.gpuIndices, endsAt: held.endsAt },
    ]);
    const stale = await d.fails(
      'reservations.release',
      { reservationId: held.id, ifVersion: held.version - 1 },
      ACME,
    );
    expect(stale.code).toBe('CONFLICT');
    expect((await d.fails('reservations.release', { reservationId: held.id }, GLOBEX)).code).toBe(
      'NOT_FOUND',
    );
    expect((await d.api('reservations.get', { reservationId: held.id }, ACME)).state).toBe('active');
    const released = await d.api(
      'reservations.release',
      { reservationId: held.id, ifVersion: held.version },
      ACME,
    );
    expect(released).toMatchObject({ state: 'ended', endReason: 'released', version: held.version + 1 });
    expect(released.binding).toEqual(held.binding.map((b: object) => ({ ...b, nodeState: 'ready' })));
    expect(await holders()).toEqual([]);
    const again = await d.api('reservations.release', { reservationId: held.id }, ACME);
    expect(again).toMatchObject({ state: 'ended', version: released.version });
    // Six GPUs on two 4-GPU nodes: the release gives every one back.
    const wide = await d.api('reservations.create', { poolId, gpus: 6, durationSeconds: HOUR }, ACME);
    expect(wide.binding.map((b: { nodeId: string }) => b.nodeId).sort()).toEqual(
      [one.nodeId, two.nodeId].sort(),
    );
    await d.api('reservations.release', { reservationId: wide.id }, ACME);
    const capacity = await d.api('capacity.get', { poolId }, ACME);
    expect(capacity.items[0]).toMatchObject({ total: 8, free: 8, reserved: 0 });
    const nodes = await d.api('nodes.list', { poolId });
    expect(nodes.items.map((n: { freeGpus: number }) => n.freeGpus)).toEqual([4, 4]);
  });

  it('extend moves the end; expiry at the end time ends it and starts the queue', async () => {
    const { poolId } = await seedPool(d, 'expiry');
    const node = await addNode(d, poolId, 'e-l40s', l40sx4());
    const beat = () => d.api('nodes.heartbeat', { nodeCredential: node.credential }, '');
    const held = await d.api('reservations.create', { poolId, gpus: 4, durationSeconds: HOUR }, ACME);
    const extended = await d.api(
      'reservations.extend',
      { reservationId: held.id, bySeconds: HOUR, ifVersion: held.version },
      ACME,
    );
    expect(Date.parse(extended.endsAt) - Date.parse(held.endsAt)).toBe(HOUR * 1000);
    expect(extended.durationSeconds).toBe(2 * HOUR);
    const stale = await d.fails(
      'reservations.extend',
      { reservationId: held.id, bySeconds: 60, ifVersion: held.version },
      ACME,
    );
    expect(stale.code).toBe('CONFLICT');
    const waiting = await d.api('reservations.create', { poolId, gpus: 2, durationSeconds: HOUR }, GLOBEX);
    expect(waiting.state).toBe('queued');
    d.clock.advance(HOUR + 1);
    await beat();
    await runFleetController(d.db, d.clock.now());
    expect((await d.api('reservations.get', { reservationId: held.id }, ACME)).state).toBe('active');
    d.clock.advance(HOUR);
    await beat();
    const report = await runFleetController(d.db, d.clock.now());
    expect(report.expired).toBeGreaterThanOrEqual(1);
    expect(await d.api('reservations.get', { reservationId: held.id }, ACME)).toMatchObject({
      state: 'ended',
      endReason: 'expired',
    });
    expect((await d.api('reservations.get', { reservationId: waiting.id }, GLOBEX)).state).toBe('active');
    expect((await d.fails('reservations.extend', { reservationId: held.id, bySeconds: 60 }, ACME)).code).toBe(
      'INVALID_STATE',
    );
    const listed = await d.api('reservations.list', { state: 'ended' }, ACME);
    expect(listed.items.map((r: { id: string }) => r.id)).toContain(held.id);
    await d.api('reservations.release', { reservationId: waiting.id }, GLOBEX);
  });

  it('past its end time a reservation has expired, before the controller gets to it', async () => {
    const { poolId } = await seedPool(d, 'past-end');
    const node = await addNode(d, poolId, 'pe-l40s', l40sx4());
    const first = await d.api('reservations.create', { poolId, gpus: 2, durationSeconds: HOUR }, ACME);
    const second = await d.api('reservations.create', { poolId, gpus: 2, durationSeconds: HOUR }, ACME);
    d.clock.advance(HOUR + 30);
    await d.api('nodes.heartbeat', { nodeCredential: node.credential }, '');
    const late = await d.fails('reservations.extend', { reservationId: first.id, bySeconds: HOUR }, ACME);
    expect(late).toMatchObject({ code: 'INVALID_STATE', details: { endsAt: first.endsAt } });
    expect(await d.api('reservations.get', { reservationId: first.id }, ACME).then((r) => r.endsAt)).toBe(
      first.endsAt,
    );
    // A release then ends it as expired, at its end time; so does the controller for the other.
    const released = await d.api('reservations.release', { reservationId: first.id }, ACME);
    expect(released).toMatchObject({ state: 'ended', endReason: 'expired', endedAt: first.endsAt });
    await runFleetController(d.db, d.clock.now());
    expect(await d.api('reservations.get', { reservationId: second.id }, ACME)).toMatchObject({
      state: 'ended',
      endReason: 'expired',
      endedAt: second.endsAt,
    });
  });

  it("no request tolerates compute's own taints, which keep work off a node until it is safe", async () => {
    const { poolId } = await seedPool(d, 'system-taint');
    const input = {
      poolId,
      gpus: 1,
      durationSeconds: HOUR,
      tolerations: ['better-compute.io/inventory-pending'],
    };
    for (const method of ['reservations.create', 'capacity.preview'])
      expect(await d.fails(method, input, ACME)).toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('a request no node set could ever hold is refused, not queued forever', async () => {
    const { poolId } = await seedPool(d, 'never');
    await addNode(d, poolId, 'n-l40s', l40sx4());
    const failure = await d.fails('reservations.create', { poolId, gpus: 5, durationSeconds: HOUR }, ACME);
    expect(failure.code).toBe('INVALID_ARGUMENT');
    expect(
      (await d.fails('reservations.create', { poolId, gpus: 2, durationSeconds: HOUR, nvlink: true }, ACME))
        .code,
    ).toBe('INVALID_ARGUMENT');
    // One GPU with --nvlink still asks for a GPU in an NVLink domain, which an L40S is not in.
    expect(
      await d.fails('reservations.create', { poolId, gpus: 1, durationSeconds: HOUR, nvlink: true }, ACME),
    ).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: `pool ${poolId} has no NVLink domain with 1 GPU matching this request`,
    });
  });

  it('quotas hold at reserve and at activation', async () => {
    const { poolId } = await seedPool(d, 'quota');
    await addNode(d, poolId, 'qu-h100', h100x8('qu-nvl'));
    const set = await d.api('quotas.set', { poolId, subjectTenantId: 'acme', resource: 'gpus', limit: 4 });
    expect(set).toMatchObject({ limit: 4, used: 0, version: 1 });
    expect((await d.fails('quotas.set', { poolId, subjectTenantId: 'acme', limit: 4 }, ACME)).code).toBe(
      'ACCESS_DENIED',
    );
    const a = await d.api('reservations.create', { poolId, gpus: 3, durationSeconds: HOUR }, ACME);
    const over = await d.fails('reservations.create', { poolId, gpus: 2, durationSeconds: HOUR }, ACME);
    expect(over).toMatchObject({ code: 'QUOTA_EXCEEDED', details: { resource: 'gpus', limit: 4, used: 3 } });
    const filler = await d.api('reservations.create', { poolId, gpus: 5, durationSeconds: HOUR }, GLOBEX);
    const queued = await d.api('reservations.create', { poolId, gpus: 1, durationSeconds: HOUR }, ACME);
    expect(queued.state).toBe('queued');
    // Lowered while queued: at activation the quota still holds, so it stays queued.
    await d.api('quotas.set', { poolId, subjectTenantId: 'acme', limit: 3, ifVersion: 1 });
    expect(
      (await d.fails('quotas.set', { poolId, subjectTenantId: 'acme', limit: 3, ifVersion: 1 })).code,
    ).toBe('CONFLICT');
    await d.api('reservations.release', { reservationId: filler.id }, GLOBEX);
    expect((await d.api('reservations.get', { reservationId: queued.id }, ACME)).state).toBe('queued');
    expect((await d.api('quotas.get', { poolId }, ACME)).items).toEqual(
      expect.arrayContaining([expect.objectContaining({ resource: 'gpus', limit: 3, used: 4 })]),
    );
    await d.api('reservations.release', { reservationId: a.id }, ACME);
    expect((await d.api('reservations.get', { reservationId: queued.id }, ACME)).state).toBe('active');
  });

  it('a cleared quota keeps counting its version, so an old --if-version cannot pass after it', async () => {
    const { poolId } = await seedPool(d, 'quota-aba');
    await addNode(d, poolId, 'qa-l40s', l40sx4());
    const quota = { poolId, subjectTenantId: 'acme', resource: 'gpus' };
    expect((await d.api('quotas.set', { ...quota, limit: 2 })).version).toBe(1);
    expect((await d.api('quotas.set', { ...quota, limit: 3 })).version).toBe(2);
    const cleared = await d.api('quotas.set', { ...quota, limit: null, ifVersion: 2 });
    expect(cleared).toMatchObject({ limit: null, version: 3 });
    const listed = await d.api('quotas.get', { poolId }, ACME);
    expect(listed.items.find((q: { resource: string }) => q.resource === 'gpus')).toMatchObject({
      limit: null,
      version: 3,
    });
    // No limit while cleared: the fast reserve applies, and four GPUs are held at once.
    const all = await d.api('reservations.create', { poolId, gpus: 4, durationSeconds: HOUR }, ACME);
    expect(all.state).toBe('active');
    await d.api('reservations.release', { reservationId: all.id }, ACME);
    expect((await d.api('quotas.set', { ...quota, limit: 5 })).version).toBe(4);
    expect(await d.fails('quotas.set', { ...quota, limit: 1, ifVersion: 2 })).toMatchObject({
      code: 'CONFLICT',
    });
    expect((await d.api('quotas.get', { poolId }, ACME)).items[0]).toMatchObject({ limit: 5, version: 4 });
  });

  it("a queued reservation its tenant's quota holds back is not the head: it holds back no backfill", async () => {
    const { poolId } = await seedPool(d, 'quota-head');
    await addNode(d, poolId, 'qh-h100', h100x8('qh-nvl'));
    const filler = await d.api('reservations.create', { poolId, gpus: 6, durationSeconds: HOUR }, GLOBEX);
    const big = await d.api('reservations.create', { poolId, gpus: 8, durationSeconds: HOUR }, ACME);
    expect(big.state).toBe('queued');
    // While big is the head, a request that would outlast its start waits behind it.
    const before = await d.api('reservations.create', { poolId, gpus: 2, durationSeconds: 3 * HOUR }, GLOBEX);
    expect(before.state).toBe('queued');
    await d.api('reservations.release', { reservationId: before.id }, GLOBEX);
    // Now acme may hold 4 GPUs: big cannot start whatever frees, so it is no one's head.
    await d.api('quotas.set', { poolId, subjectTenantId: 'acme', resource: 'gpus', limit: 4 });
    const after = await d.api('reservations.create', { poolId, gpus: 2, durationSeconds: 3 * HOUR }, GLOBEX);
    expect(after.state).toBe('active');
    expect((await d.api('reservations.get', { reservationId: big.id }, ACME)).state).toBe('queued');
    await d.api('reservations.release', { reservationId: big.id }, ACME);
    for (const r of [filler, after]) await d.api('reservations.release', { reservationId: r.id }, GLOBEX);
  });

  it('preview answers as reserve would: behind a queue, and not on an archived pool', async () => {
    const { poolId } = await seedPool(d, 'preview-queue');
    await addNode(d, poolId, 'pq-h100', h100x8('pq-nvl'));
    const filler = await d.api('reservations.create', { poolId, gpus: 6, durationSeconds: HOUR }, GLOBEX);
    const head = await d.api('reservations.create', { poolId, gpus: 8, durationSeconds: HOUR }, ACME);
    expect(head.state).toBe('queued');
    // 2 GPUs are free; the head starts when the filler ends, in an hour.
    const long = await d.api('capacity.preview', { poolId, gpus: 2, durationSeconds: 3 * HOUR }, ACME);
    expect(long).toMatchObject({
      fits: false,
      placement: null,
      earliestStartAt: filler.endsAt,
      queuedAhead: 1,
    });
    const reserved = await d.api('reservations.create', { poolId, gpus: 2, durationSeconds: 3 * HOUR }, ACME);
    expect(reserved.state).toBe('queued');
    await d.api('reservations.release', { reservationId: reserved.id }, ACME);
    const short = await d.api('capacity.preview', { poolId, gpus: 2, durationSeconds: 1800 }, ACME);
    expect(short).toMatchObject({ fits: true, queuedAhead: 1 });
    await d.api('reservations.release', { reservationId: head.id }, ACME);
    await d.api('pools.archive', { poolId });
    expect(await d.fails('capacity.preview', { poolId, gpus: 1, durationSeconds: HOUR }, ACME)).toMatchObject(
      { code: 'INVALID_STATE' },
    );
    // Still listed while it has GPUs, its free ones unavailable: it takes no new work.
    const { items } = await d.api('capacity.get', {}, GLOBEX);
    expect(items.find((p: { poolId: string }) => p.poolId === poolId)).toMatchObject({
      total: 8,
      reserved: 6,
      free: 0,
      unavailable: 2,
    });
    await d.api('reservations.release', { reservationId: filler.id }, GLOBEX);
  });

  it('a pool no longer offered: running reservations run to their end, queued ones are cancelled', async () => {
    const { poolId } = await seedPool(d, 'unoffered');
    await addNode(d, poolId, 'uo-l40s', l40sx4());
    const running = await d.api('reservations.create', { poolId, gpus: 3, durationSeconds: HOUR }, ACME);
    const waiting = await d.api('reservations.create', { poolId, gpus: 2, durationSeconds: HOUR }, ACME);
    expect(waiting.state).toBe('queued');
    await d.api('pools.unoffer', { poolId, offerTenantId: 'acme' });
    expect(
      await d.fails('reservations.extend', { reservationId: running.id, bySeconds: HOUR }, ACME),
    ).toMatchObject({ code: 'INVALID_STATE', message: `pool ${poolId} is no longer offered to acme` });
    await d.api('reservations.release', { reservationId: running.id }, ACME);
    expect(await d.api('reservations.get', { reservationId: waiting.id }, ACME)).toMatchObject({
      state: 'ended',
      endReason: 'cancelled',
    });
    expect(
      (await d.api('capacity.get', {})).items.find((p: { poolId: string }) => p.poolId === poolId),
    ).toMatchObject({ reserved: 0, free: 4 });
  });

  it('100 concurrent reserves with one idempotency key give one reservation', async () => {
    const { poolId } = await seedPool(d, 'idem');
    await addNode(d, poolId, 'i-h100', h100x8('i-nvl'));
    const input = { poolId, gpus: 1, durationSeconds: HOUR, idempotencyKey: `reserve-once-${kind}` };
    const answers = await Promise.all(
      Array.from({ length: 100 }, () => d.api('reservations.create', input, ACME)),
    );
    expect(new Set(answers.map((a) => a.id)).size).toBe(1);
    const all = await d.api('reservations.list', { poolId, limit: 500 }, ACME);
    expect(all.items).toHaveLength(1);
    const other = await d.fails('reservations.create', { ...input, gpus: 2 }, ACME);
    expect(other.code).toBe('CONFLICT');
  });

  it('a retried reserve gets its first answer even when running it again would queue or fail, and leaves nothing', async () => {
    // The key's read goes out with the reserve's first statement, so the reserve runs before the
    // kept answer is seen; what it did then is rolled back.
    const { poolId } = await seedPool(d, 'idem-late');
    await addNode(d, poolId, 'il-h100', h100x8('il-nvl'));
    const input = { poolId, gpus: 8, durationSeconds: HOUR, idempotencyKey: `reserve-late-${kind}` };
    const first = await d.api('reservations.create', input, ACME);
    expect(first.state).toBe('active');
    const events = async () => {
      let count = 0;
      let cursor: string | undefined;
      do {
        const page = await d.api('events.list', { type: 'reservation.*', limit: 200, cursor }, ACME);
        count += page.items.filter((e: { data: { poolId?: string } }) => e.data.poolId === poolId).length;
        cursor = page.nextCursor ?? undefined;
      } while (cursor);
      return count;
    };
    const recorded = await events();
    // The node is full: run again, the reserve would queue.
    expect(await d.api('reservations.create', input, ACME)).toEqual(first);
    // Over a quota now: run again, the reserve would fail.
    await d.api('quotas.set', { poolId, subjectTenantId: 'acme', resource: 'gpus', limit: 8 });
    expect(await d.api('reservations.create', input, ACME)).toEqual(first);
    expect((await d.fails('reservations.create', { ...input, idempotencyKey: undefined }, ACME)).code).toBe(
      'QUOTA_EXCEEDED',
    );
    expect((await d.api('reservations.list', { poolId, limit: 50 }, ACME)).items).toHaveLength(1);
    expect(await events()).toBe(recorded);
  });

  it('concurrent reserves on one pool never bind a GPU twice', async () => {
    const { poolId } = await seedPool(d, 'race');
    for (let i = 0; i < 4; i++) await addNode(d, poolId, `race-${i}`, h100x8(`race-nvl-${i}`));
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        d.api(
          'reservations.create',
          { poolId, gpus: 1 + (i % 3), durationSeconds: HOUR, nvlink: i % 2 === 0 },
          i % 2 ? ACME : GLOBEX,
        ),
      ),
    );
    // A reserve answered `queued` may have been started since by a later one: read them again.
    const now = await Promise.all(
      answers.map((a) =>
        d.api('reservations.get', { reservationId: a.id }, a.tenantId === 'acme' ? ACME : GLOBEX),
      ),
    );
    const active = now.filter((a) => a.state === 'active');
    const gpus = active.flatMap((a) =>
      a.binding.flatMap((b: { nodeId: string; gpuIndices: number[] }) =>
        b.gpuIndices.map((i) => `${b.nodeId}/${i}`),
      ),
    );
    expect(new Set(gpus).size).toBe(gpus.length);
    expect(gpus.length).toBeLessThanOrEqual(32);
    const { items } = await d.api('capacity.get', { poolId }, ACME);
    expect(items[0]).toMatchObject({ total: 32, reserved: gpus.length, free: 32 - gpus.length });
  });
});
