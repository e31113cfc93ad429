/**
 * What the parts of the server outside modules/ use of the VPS module: the gateway records a VM's
 * exit its node reports, and the simulator runs the simulated runtime's job.
 */
export { instanceExited, type InstanceExit } from './exits.js';
export { SIM_RUNTIME_JOB } from './sim-runtime.js';
