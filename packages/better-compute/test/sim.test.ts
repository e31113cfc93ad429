/** The simulator: a run with faults keeps every invariant, and the same seed gives the same state hash. */
import { describe, expect, it } from 'vitest';
import { runSimulation, startSimulatedFleet } from '../src/sim/index.js';
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
    const again = await runSimulation(options);
    expect(again.stateHash).toBe(first.stateHash);
    const other = await runSimulation({ ...options, seed: 8 });
    expect(other.ok).toBe(true);
    expect(other.stateHash).not.toBe(first.stateHash);
  }, 180_000);
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
