/**
 * A property of the whole pipeline on PostgreSQL: random batches of concurrent reserve, extend,
 * release, cordon, uncordon, drain, taint and untaint calls, heartbeats, and the controller's pass
 * after the clock moves (expiry, silent nodes going offline, the queue), never break the invariants
 * the database must keep. PROPERTY_RUNS and PROPERTY_SEED search further than the suite's fixed run.
 */
import { isPostgresReachable } from '@better-compute/db/testing';
import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runFleetController } from '../src/modules/fleet/index.js';
import { checkAll } from '../src/sim/invariants.js';
import {
  a100x8,
  ACME,
  addNode,
  createFleetDeployment,
  type FleetDeployment,
  GLOBEX,
  h100x8,
  l40sx4,
  seedPool,
} from './fleet-support.js';

const reachable = await isPostgresReachable();
const QUOTA = 12;

type Op =
  | { kind: 'reserve'; tenant: 0 | 1; gpus: number; nvlink: boolean; hours: number }
  | { kind: 'extend' | 'release'; pick: number }
  | { kind: 'cordon' | 'uncordon' | 'drain' | 'taint' | 'untaint' | 'beat'; pick: number }
  | { kind: 'tick'; minutes: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('reserve' as const),
      tenant: fc.constantFrom(0 as const, 1 as const),
      gpus: fc.integer({ min: 1, max: 8 }),
      nvlink: fc.boolean(),
      hours: fc.integer({ min: 1, max: 4 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('extend' as const), pick: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constantFrom('cordon' as const, 'uncordon' as const, 'drain' as const),
      pick: fc.nat(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constantFrom('taint' as const, 'untaint' as const), pick: fc.nat() }),
  },
  // Heartbeats bring silent nodes back; the controller's pass after the clock moves ends what expired,
  // takes nodes that did not beat offline, and starts what fits.
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('beat' as const), pick: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('tick' as const), minutes: fc.integer({ min: 1, max: 120 }) }),
  },
);
const TAINT = 'maintenance';

describe.runIf(reachable)('random concurrent work on PostgreSQL', () => {
  let d: FleetDeployment;
  beforeAll(async () => {
    d = await createFleetDeployment('postgres', undefined, 16);
  });
  afterAll(async () => d?.close());

  async function checkInvariants(
    poolId: string,
    stuckNodes: Set<string>,
    bindingsBefore: number,
  ): Promise<void> {
    const db = d.db;
    // The simulator's invariants (one definition of them): no GPU bound twice, slots and counters
    // agreeing with the bindings, active reservations holding exactly their GPUs (in one NVLink domain
    // when asked), states with reasons, drains completed, and acme's quota.
    expect(await checkAll(db, 0, new Map([['acme', QUOTA]]), poolId)).toEqual([]);
    if (stuckNodes.size) {
      const fresh = await sql<{
        n: number;
      }>`select count(*)::int as n from compute.gpu_bindings where id > ${bindingsBefore} and node_id = any(${[...stuckNodes]}::text[])`.execute(
        db,
      );
      expect(fresh.rows[0]!.n).toBe(0);
    }
    const drained = await sql<{
      n: number;
    }>`select count(*)::int as n from compute.nodes where pool_id = ${poolId} and state = 'draining' and free_gpus = gpu_count`.execute(
      db,
    );
    expect(drained.rows[0]!.n).toBe(0);
  }

  it(
    'keeps every invariant',
    async () => {
      let run = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.array(op, { minLength: 1, maxLength: 10 }), { minLength: 1, maxLength: 5 }),
          async (batches) => {
            const { poolId } = await seedPool(d, `prop-${run++}`);
            await d.api('quotas.set', { poolId, subjectTenantId: 'acme', limit: QUOTA });
            const joined = [
              await addNode(d, poolId, 'p-h100', h100x8(`${poolId}-h`)),
              await addNode(d, poolId, 'p-a100', a100x8(`${poolId}-a0`, `${poolId}-a1`)),
              await addNode(d, poolId, 'p-l40s', l40sx4()),
            ];
            const nodes = joined.map((n) => n.nodeId);
            const reservations: { id: string; token: string }[] = [];
            for (const batch of batches) {
              const states = (await d.db
                .selectFrom('compute.nodes' as never)
                .select(['id', 'state', 'no_schedule'] as never)
                .where('pool_id' as never, '=', poolId as never)
                .execute()) as { id: string; state: string; no_schedule: string[] }[];
              // A node that cannot take work at the batch's start, and that nothing in the batch could
              // make ready (uncordon, a heartbeat) or untaint, must receive nothing new.
              const touched = new Set(
                batch
                  .filter((o) => o.kind === 'uncordon' || o.kind === 'beat' || o.kind === 'untaint')
                  .map((o) => nodes[(o as { pick: number }).pick % nodes.length]!),
              );
              const stuck = new Set(
                states
                  .filter((s) => (s.state !== 'ready' || s.no_schedule.length > 0) && !touched.has(s.id))
                  .map((s) => s.id),
              );
              const before = await sql<{
                id: number;
              }>`select coalesce(max(id), 0)::int as id from compute.gpu_bindings`.execute(d.db);
              const known = [...reservations];
              await Promise.all(
                batch.map(async (o) => {
                  try {
                    if (o.kind === 'reserve') {
                      const token = o.tenant ? GLOBEX : ACME;
                      const r = await d.api(
                        'reservations.create',
                        { poolId, gpus: o.gpus, durationSeconds: o.hours * 3600, nvlink: o.nvlink },
                        token,
                      );
                      reservations.push({ id: r.id, token });
                    } else if (o.kind === 'extend' || o.kind === 'release') {
                      const target = known[o.pick % Math.max(1, known.length)];
                      if (!target) return;
                      if (o.kind === 'extend')
                        await d.api(
                          'reservations.extend',
                          { reservationId: target.id, bySeconds: 600 },
                          target.token,
                        );
                      else await d.api('reservations.release', { reservationId: target.id }, target.token);
                    } else if (o.kind === 'tick') {
                      d.clock.advance(o.minutes * 60);
                      await runFleetController(d.db, d.clock.now());
                    } else if (o.kind === 'beat') {
                      const node = joined[o.pick % joined.length]!;
                      await d.api('nodes.heartbeat', { nodeCredential: node.credential }, '');
                    } else if (o.kind === 'taint' || o.kind === 'untaint') {
                      const nodeId = nodes[o.pick % nodes.length];
                      await d.api(
                        'nodes.taint',
                        o.kind === 'taint'
                          ? { nodeId, add: [{ key: TAINT, effect: 'NoSchedule' }] }
                          : { nodeId, remove: [TAINT] },
                      );
                    } else {
                      await d.api(`nodes.${o.kind}`, { nodeId: nodes[o.pick % nodes.length] });
                    }
                  } catch (error) {
                    const code = (error as { code?: string }).code;
                    // Refusals the rules allow; anything else (INTERNAL, a deadlock) fails the property.
                    if (!['QUOTA_EXCEEDED', 'INVALID_STATE', 'INVALID_ARGUMENT'].includes(code ?? ''))
                      throw error;
                  }
                }),
              );
              await checkInvariants(poolId, stuck, before.rows[0]!.id);
            }
            const states = (await d.db
              .selectFrom('compute.reservations' as never)
              .select(['state', 'end_reason'] as never)
              .where('pool_id' as never, '=', poolId as never)
              .execute()) as { state: string; end_reason: string | null }[];
            expect(states.every((r) => (r.state === 'ended') === (r.end_reason !== null))).toBe(true);
          },
        ),
        {
          // A failure depends on how the batch's calls interleaved, so shrinking would replay runs
          // that pass: the first failing run is reported as it was.
          endOnFailure: true,
          numRuns: Number(process.env.PROPERTY_RUNS ?? 25),
          seed: Number(process.env.PROPERTY_SEED ?? 20260101),
        },
      );
    },
    Number(process.env.PROPERTY_RUNS ?? 25) * 24_000,
  );
});
