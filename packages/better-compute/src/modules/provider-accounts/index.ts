/**
 * What the rest of the server uses of the provider accounts module: the driver contract (for
 * documentation and plugins), and what fleet configuration reads and calls: the tenant's accounts,
 * and the services of providerAccounts.create, update and delete with their credential checks.
 */
import { createSecretSealer } from '../secrets/index.js';
import { createAccount, updateAccount } from './service.js';

export { credentialChecks, deleteAccount, tenantAccounts } from './service.js';

// Create and update open no credential (only offers and bootstrap do), so they need no secret.
const deps = { sealer: createSecretSealer(undefined) };
export const createProviderAccount = createAccount(deps);
export const updateProviderAccount = updateAccount(deps);
