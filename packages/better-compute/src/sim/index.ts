/** The simulator: `runSimulation` for `sim` and tests, `startSimulatedFleet` for `dev --sim N`. */
export { runSimulation, type SimulationOptions, type SimulationReport } from './simulate.js';
export { startSimulatedFleet, type SimulatedFleet, type SimulatedFleetOptions } from './fleet-runner.js';
export { seedFleet, createRandom, type SimNodeSpec } from './fleet.js';
export type { Violation } from './invariants.js';
