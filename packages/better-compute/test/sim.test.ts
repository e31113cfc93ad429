/** The simulator: a run with faults keeps every invariant, and the same seed gives the same state hash. */
import { openDatabase } from '@better-compute/db';
import { sql, type Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { ComputeTables } from '../src/db/tables.js';
import { runSimulation, startSimulatedFleet } from '../src/sim/index.js';
import { checkInstances } from '../src/sim/instances.js';
import { checkAll, EventReplay } from '../src/sim/invariants.js';
import { ACME, createFleetDeployment, OPS } from './fleet-support.js';

describe('the deterministic simulator', () => {
  it('keeps every invariant with faults, and the same seed gives the same hash', async () => {
    const options = { seed: 7, nodes: 40, steps: 250, tenants: 3, faults: true, fullCheckEvery: 25 };
    const first = await runSimulation(options);
    expect(first.violations).toEqual([]);
    expect(first.ok).toBe(true);
    expect(first.counts['reservations.active'] ?? 0).toBeGreaterThan(0);
    expect(first.counts['reservations.ended'] ?? 0).toBeGreaterThan(0);
    expect(first.counts['reserve.queued'] ?? 0).toBeGreaterThan(0);
    // Instances on the VPS pool went through their workflows on simulated nodes.
    expect(first.counts['instance.create'] ?? 0).toBeGreaterThan(0);
    expect(first.counts['instance.stop'] ?? 0).toBeGreaterThan(0);
    expect(first.counts.jobs ?? 0).toBeGreaterThan(0);
    const again = await runSimulation(options);
    expect(again.stateHash).toBe(first.stateHash);
    const other = await runSimulation({ ...options, seed: 8 });
    expect(other.ok).toBe(true);
    expect(other.stateHash).not.toBe(first.stateHash);
  }, 180_000);
});

describe('the simulator’s checks', () => {
  it('see a change made without its event, and counters that drift', async () => {
    const database = await openDatabase({ pglite: {} });
    try {
      const report = await runSimulation({ seed: 3, nodes: 12, steps: 120, faults: false, database });
      expect(report.ok).toBe(true);
      const db = database.db as Kysely<ComputeTables>;
      const replay = new EventReplay();
      await replay.catchUp(db);
      expect(await replay.compare(db, 1)).toEqual([]);
      const pool = (await sql<{ id: string }>`select id from compute.pools`.execute(db)).rows[0]!.id;
      // An active reservation moved without an event: the incremental comparison reads it.
      const active = (
        await sql<{ id: string }>`select id from compute.reservations where state = 'active' limit 1`.execute(
          db,
        )
      ).rows[0]!.id;
      await sql`update compute.reservations set ends_at = ends_at + interval '1 hour' where id = ${active}`.execute(
        db,
      );
      const seen = await replay.compare(db, 2);
      expect(seen.map((v) => v.message).join()).toContain(active);
      // An ended one changed: only the full comparison reads every row.
      await sql`update compute.reservations set ends_at = ends_at - interval '1 hour' where id = ${active}`.execute(
        db,
      );
      const ended = (
        await sql<{ id: string }>`select id from compute.reservations where state = 'ended' limit 1`.execute(
          db,
        )
      ).rows[0]!.id;
      await sql`update compute.reservations set end_reason = 'cancelled' where id = ${ended}`.execute(db);
      expect(await replay.compare(db, 3)).toEqual([]);
      expect((await replay.compare(db, 4, true)).map((v) => v.message).join()).toContain(ended);
      // A held GPU's slot emptied behind its binding's back (the group's free count kept consistent,
      // as the table's check demands): the binding and the slot disagree, and the node's count is off.
      expect(await checkAll(db, 5, new Map(), pool)).toEqual([]);
      await sql`
        update compute.gpu_groups g set holders = array_replace(g.holders, ${active}, null), free = g.total
        where g.node_id = (select b.node_id from compute.gpu_bindings b where b.reservation_id = ${active} and b.released_at is null limit 1)`.execute(
        db,
      );
      const drift = await checkAll(db, 6, new Map(), pool);
      expect(drift.map((v) => v.invariant)).toEqual(
        expect.arrayContaining(['no-gpu-bound-twice', 'counters-match']),
      );
      // An instance grown past its node, and one whose GPUs' reservation ended under it.
      const vpsPool = (
        await sql<{ id: string }>`select id from compute.pools where class = 'vps'`.execute(db)
      ).rows[0]!.id;
      expect(await checkInstances(db, 7, vpsPool)).toEqual([]);
      const instance = (
        await sql<{ id: string; reservation_id: string }>`
          select id, reservation_id from compute.instances
          where state <> 'deleted' and reservation_id is not null limit 1`.execute(db)
      ).rows[0]!;
      await sql`update compute.instances set vcpus = 100000 where id = ${instance.id}`.execute(db);
      await sql`
        update compute.reservations set state = 'ended', end_reason = 'expired'
        where id = ${instance.reservation_id}`.execute(db);
      const instances = await checkInstances(db, 8, vpsPool);
      expect(instances.map((v) => v.invariant).sort()).toEqual([
        'instance-gpus-held',
        'instances-fit-their-node',
      ]);
      expect(instances.map((v) => v.message).join()).toContain(instance.id);
    } finally {
      await database.close();
    }
  }, 120_000);
});

describe('dev --sim', () => {
  it('simulated machines join through join requests and heartbeat until stopped', async () => {
    const d = await createFleetDeployment('pglite');
    try {
      const fleet = await startSimulatedFleet(d.compute, {
        nodes: 6,
        token: OPS,
        offerTo: ['acme'],
        heartbeatMs: 50,
      });
      expect(fleet.nodeIds).toHaveLength(6);
      const nodes = await d.api('nodes.list', { poolId: fleet.poolId });
      expect(nodes.items.every((n: { state: string }) => n.state === 'ready')).toBe(true);
      const requests = await d.api('joinRequests.list', { state: 'approved' });
      expect(requests.items).toHaveLength(6);
      const capacity = await d.api('capacity.get', {}, ACME);
      expect(capacity.items[0].total).toBeGreaterThan(0);
      await new Promise((resolve) => setTimeout(resolve, 200));
      await fleet.stop();
    } finally {
      await d.close();
    }
  });
});
