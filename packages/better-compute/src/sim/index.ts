/** The simulator: `runSimulation` for `sim` and tests, `startSimulatedFleet` for `dev --sim N`. */
export { runSimulation } from './simulate.js';
export { startSimulatedFleet } from './fleet-runner.js';
