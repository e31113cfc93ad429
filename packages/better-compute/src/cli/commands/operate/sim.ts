/**
 * `sim --seed S --nodes N --steps K [--tenants T] [--faults] [--metal M]`: the deterministic fleet
 * simulator on an in-memory PGlite, with M bare-metal machines behind a simulated site agent when
 * asked (docs/metal.md). Prints the JSON report; any invariant violation fails with SIM_VIOLATION
 * (exit 1) after the report is printed.
 */
import { ComputeError } from '@better-compute/core';
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'sim',
  group: 'Operate',
  summary: 'Run the deterministic fleet simulator and check its invariants',
  target: 'none',
  flags: {
    seed: {
      type: 'number',
      integer: true,
      min: 0,
      default: 1,
      description: 'The seed; the same seed gives the same state hash',
    },
    nodes: {
      type: 'number',
      integer: true,
      min: 1,
      max: 100_000,
      default: 16,
      description: 'Simulated machines',
      placeholder: 'N',
    },
    steps: {
      type: 'number',
      integer: true,
      min: 1,
      max: 10_000_000,
      default: 1000,
      description: 'Steps of the virtual clock',
      placeholder: 'K',
    },
    tenants: {
      type: 'number',
      integer: true,
      min: 1,
      max: 100,
      default: 3,
      description: 'Simulated tenants',
      placeholder: 'T',
    },
    faults: {
      type: 'boolean',
      description:
        'Nodes go silent, are cordoned, drained and retired; BMC calls hang, fail or answer late, PXE requests are lost',
    },
    metal: {
      type: 'number',
      integer: true,
      min: 0,
      max: 10_000,
      default: 0,
      description: 'Bare-metal machines behind a simulated site agent; 0 runs without them',
      placeholder: 'M',
    },
  },
  examples: [
    'better-compute sim --seed 1 --nodes 16 --steps 1000',
    'better-compute sim --seed 1 --nodes 1000 --steps 100000 --faults',
    'better-compute sim --seed 1 --nodes 50 --steps 2000 --faults --metal 20',
  ],
  async run({ flags, print, log }) {
    const { runSimulation } = await import('../../../sim/index.js');
    const report = await runSimulation({
      seed: flags.seed,
      nodes: flags.nodes,
      steps: flags.steps,
      tenants: flags.tenants,
      faults: flags.faults,
      metal: flags.metal,
      progressEvery: Math.max(1000, Math.floor(flags.steps / 10)),
      // Where the time went so far, by phase: a long run that slows down says why as it goes.
      onProgress: (step, elapsedMs, phasesMs, violations) =>
        log(
          `sim: step ${step} of ${flags.steps}, ${violations} violation(s) so far (${Math.round(elapsedMs)} ms; ${Object.entries(
            phasesMs,
          )
            .map(([phase, ms]) => `${phase} ${Math.round(ms)}`)
            .join(', ')})`,
        ),
    });
    print(report);
    if (!report.ok) {
      const first = report.violations[0];
      throw new ComputeError(
        'SIM_VIOLATION',
        `${report.violations.length} invariant violation(s)${first ? `; the first: ${JSON.stringify(first)}` : ''}`,
        { details: { seed: report.seed, stateHash: report.stateHash, violations: report.violations.length } },
      );
    }
    return undefined;
  },
});
