/**
 * What the parts of the server outside modules/ use of the VPS module: the gateway records a VM's
 * exit its node reports, and the simulator runs the simulated runtime's job; fleet configuration
 * (modules/fleet-config) reads and changes flavors through the flavors' own services.
 */
export { instanceExited } from './exits.js';
export { SIM_RUNTIME_JOB } from './sim-runtime.js';
export { createFlavor, updateFlavor, deleteFlavor } from './flavors.js';
export { tenantFlavors } from './queries.js';
