/**
 * What the rest of the server uses of the provider accounts module: the driver contract (for
 * documentation and plugins), and the account rows fleet configuration exports and plans.
 */
export type { ProviderDriver, ProviderMachine, ProviderOffer } from './driver.js';
export { accountView } from './service.js';
