/** A measurement, not a check: SIM_MEASURE=1 SIM_NODES=1000 SIM_STEPS=3000 npx vitest run packages/better-compute/test/sim-measure.test.ts */
import { it } from 'vitest';
import { runSimulation } from '../src/sim/index.js';
it.runIf(process.env.SIM_MEASURE)(
  'measure',
  async () => {
    const nodes = Number(process.env.SIM_NODES ?? 200),
      steps = Number(process.env.SIM_STEPS ?? 1000);
    const report = await runSimulation({
      seed: Number(process.env.SIM_SEED ?? 1),
      fullCheckEvery: Number(process.env.SIM_FULL_CHECK_EVERY ?? 100),
      nodes,
      steps,
      faults: true,
      progressEvery: 500,
      onProgress: (s, ms) => console.log(`step ${s} ${Math.round(ms)}ms`),
    });
    console.log(JSON.stringify({ ...report, violations: report.violations.slice(0, 5) }, null, 1));
  },
  3_600_000,
);
