/**
 * What the parts of the server outside modules/ (the package's entry, the simulator, the gateway,
 * the command line) and fleet configuration (modules/fleet-config) use of the fleet module.
 */
export { parseSelector, requestTerms, matchesSelector } from './reservations/selector.js';
export { runFleetController } from './controller.js';
export {
  isSiteAgentOf,
  nodeTenant,
  platformObjects,
  type PlatformPool,
  type PlatformSite,
} from './queries.js';
// Fleet configuration makes its changes with the methods' own services, never by writing the tables.
export { createSite, updateSite, deleteSite } from './sites.js';
export { createPool, updatePool, archivePool } from './pools.js';
export { offerPool } from './offers.js';
export { setQuota } from './quotas.js';
