/**
 * Best fit has one rule and three forms: `place` in TypeScript (placement.ts), `findPlacement`'s
 * queries (placement-sql.ts, the locked path and previews), and the one raw statement of the fast
 * reserve (`reserveFast`, reserve.ts). On random fragmented fleets, each form must put a request
 * on the same GPUs: the preview through findPlacement, and a real reserve through the API.
 */
import { testDatabaseKinds } from '@better-compute/db/testing';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  filterSql,
  findPlacement,
  groupsQuery,
  toFree,
} from '../src/modules/fleet/reservations/placement-sql.js';
import { type Allocation, place } from '../src/modules/fleet/reservations/placement.js';
import { fleetDb } from '../src/modules/fleet/tables.js';
import { ACME, addNode, ApiFailure, createFleetDeployment, type GpuSpec, seedPool } from './fleet-support.js';

const HOUR = 3600;

/** A node of `count` GPUs: no NVLink, one domain, or two halves in two domains. */
function gpus(count: number, layout: 0 | 1 | 2, name: string): GpuSpec[] {
  return Array.from({ length: count }, (_, index) => ({
    index,
    model: 'H100',
    product: 'H100-SXM5-80GB',
    vramGiB: 80,
    nvlinkDomain:
      layout === 0 ? null : layout === 1 ? `${name}-d` : `${name}-${index < count / 2 ? 'a' : 'b'}`,
  }));
}

/** GPUs per node, the form a binding and an allocation can both be compared in. */
function perNode(allocations: readonly Allocation[] | null): Record<string, number> | null {
  if (!allocations) return null;
  const counts: Record<string, number> = {};
  for (const a of allocations) counts[a.nodeId] = (counts[a.nodeId] ?? 0) + a.count;
  return counts;
}

const fleet = fc.record({
  nodes: fc.array(
    fc.record({
      count: fc.integer({ min: 1, max: 8 }),
      layout: fc.constantFrom(0 as const, 1 as const, 2 as const),
    }),
    { minLength: 2, maxLength: 6 },
  ),
  // Reservations made first, to fragment the fleet; then the requests compared.
  taken: fc.array(fc.integer({ min: 1, max: 6 }), { maxLength: 5 }),
  requests: fc.array(fc.record({ gpus: fc.integer({ min: 1, max: 12 }), nvlink: fc.boolean() }), {
    minLength: 4,
    maxLength: 8,
  }),
});

describe.each(await testDatabaseKinds())('best fit on %s', (kind) => {
  it('place, findPlacement and a real reserve choose the same GPUs on random fleets', async () => {
    const d = await createFleetDeployment(kind);
    let round = 0;
    try {
      await fc.assert(
        fc.asyncProperty(fleet, async ({ nodes, taken, requests }) => {
          const { poolId } = await seedPool(d, `fit-${++round}`);
          for (const [index, node] of nodes.entries())
            await addNode(
              d,
              poolId,
              `fit-${round}-${index}`,
              gpus(node.count, node.layout, `r${round}n${index}`),
            );
          for (const count of taken) {
            const made = await d.api(
              'reservations.create',
              { poolId, gpus: count, durationSeconds: HOUR },
              ACME,
            );
            // One that does not fit would queue and send later reserves down the locked path.
            if (made.state === 'queued')
              await d.api('reservations.release', { reservationId: made.id }, ACME);
          }
          const db = fleetDb(d.db);
          for (const request of requests) {
            const groups = toFree(
              await groupsQuery(db, poolId, filterSql([], []))
                .orderBy('n.seq')
                .orderBy('g.group_no')
                .execute(),
            );
            const expected = perNode(place(groups, request.gpus, request.nvlink));
            const found = await findPlacement(
              db,
              { poolId, gpus: request.gpus, durationSeconds: HOUR, nvlink: request.nvlink, tolerations: [] },
              [],
            );
            expect(perNode(found)).toEqual(expected);
            const reserved = await d
              .api(
                'reservations.create',
                { poolId, gpus: request.gpus, durationSeconds: HOUR, nvlink: request.nvlink },
                ACME,
              )
              .catch((error: unknown) => error);
            if (reserved instanceof ApiFailure) {
              // More than the pool could ever hold is refused, not queued: nothing fits it now either.
              expect(reserved.code).toBe('INVALID_ARGUMENT');
              expect(expected).toBeNull();
              continue;
            }
            if (expected === null) expect(reserved.state).toBe('queued');
            else {
              const bound: Record<string, number> = {};
              for (const b of reserved.binding as { nodeId: string; gpuIndices: number[] }[])
                bound[b.nodeId] = (bound[b.nodeId] ?? 0) + b.gpuIndices.length;
              expect({ request, bound }).toEqual({ request, bound: expected });
            }
            await d.api('reservations.release', { reservationId: reserved.id }, ACME);
          }
        }),
        { numRuns: 8, seed: 42 },
      );
    } finally {
      await d.close();
    }
  }, 300_000);
});
