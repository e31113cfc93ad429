/**
 * The simulator with bare-metal machines (`sim --metal N`): a run with BMC and PXE faults keeps the
 * metal invariants and sees each fault (a cleaning's disk write among them), failed by the real controller's timeouts, and the same seed
 * gives the same hash; a retired machine written into the store with a running metal.clean
 * workflow between two steps is reported.
 */
import { newId } from '@better-compute/core';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { runSimulation } from '../src/sim/index.js';

describe('the simulator’s bare-metal machines', () => {
  it('keep every invariant through BMC and PXE faults, and the same seed gives the same hash', async () => {
    const options = { seed: 11, nodes: 6, steps: 250, faults: true, metal: 4, fullCheckEvery: 25 };
    const first = await runSimulation(options);
    expect(first.violations).toEqual([]);
    expect(first.ok).toBe(true);
    expect(first.metal).toBe(4);
    const { counts } = first;
    // Each fault happened, and the controller's own timeouts ended what it left hanging: a BMC
    // call nobody answered failed its step after 120 s, a lost PXE request the report's 15 minutes.
    for (const fault of ['unanswered', 'refused', 'late', 'lost-pxe', 'disk-write'])
      expect(counts[`metal.fault.${fault}`] ?? 0, fault).toBeGreaterThan(0);
    const timeouts = (prefix: string) =>
      Object.entries(counts)
        .filter(([key]) => key.startsWith(prefix))
        .reduce((sum, [, n]) => sum + n, 0);
    expect(timeouts('metal.timeout.bmc.')).toBeGreaterThan(0);
    expect(counts['metal.timeout.wait.metal.inspect'] ?? 0).toBeGreaterThan(0);
    // The agent dropped what the controller gave up on, and the ramdisks' reports landed.
    expect(counts['metal.agent.dropped'] ?? 0).toBeGreaterThan(0);
    expect(counts['metal.report.recorded'] ?? 0).toBeGreaterThan(0);
    for (const verb of ['manage', 'inspect', 'provide', 'recover', 'power.on', 'power.off'])
      expect(counts[`metal.${verb}`] ?? 0, verb).toBeGreaterThan(0);
    const again = await runSimulation(options);
    expect(again.violations).toEqual([]);
    expect(again.stateHash).toBe(first.stateHash);
  }, 120_000);

  it('report a retired machine with a running metal.clean workflow', async () => {
    let planted = '';
    const report = await runSimulation({
      seed: 5,
      nodes: 4,
      steps: 40,
      faults: false,
      metal: 2,
      fullCheckEvery: 20,
      // Between steps 20 and 21: a machine retired behind the metal module's back, its clean still running.
      afterStep: async (step, db) => {
        if (step !== 20) return;
        const machine = (
          await sql<{ id: string; tenant_id: string }>`
            select id, tenant_id from compute.metal_machines order by name limit 1`.execute(db)
        ).rows[0]!;
        const agent = (
          await sql<{ id: string }>`select id from compute.nodes where role = 'site-agent'`.execute(db)
        ).rows[0]!;
        planted = machine.id;
        const at = new Date(Date.UTC(2026, 0, 1) + step * 60_000);
        await sql`update compute.metal_machines set provision_state = 'retired' where id = ${machine.id}`.execute(
          db,
        );
        await sql`
          insert into compute.workflows (id, tenant_id, node_id, kind, state, current_step, steps, input, reason, created_at, updated_at)
          values (${newId('workflow')}, ${machine.tenant_id}, ${agent.id}, 'metal.clean', 'running', 0, '[]'::jsonb,
            ${JSON.stringify({ machineId: machine.id, verb: 'provide' })}::jsonb, 'planted', ${at}, ${at})`.execute(
          db,
        );
      },
    });
    expect(planted).not.toBe('');
    const retired = report.violations.filter((v) => v.invariant === 'metal-retired-idle');
    expect(retired).toHaveLength(1);
    expect(retired[0]).toMatchObject({ step: 40 });
    expect(retired[0]!.message).toContain(`retired machine ${planted} has its metal.clean workflow`);
    // Written without its event, the change is seen by the replay too.
    expect(report.violations.map((v) => v.invariant)).toContain('metal-events-replay');
    expect(report.ok).toBe(false);
  }, 60_000);
});
