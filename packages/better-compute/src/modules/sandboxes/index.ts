/**
 * What the parts of the server outside modules/ use of the sandboxes module: who owns a sandbox,
 * and whose it is (the gateway opens a sandbox's secrets as its tenant's).
 */
export { sandboxOwner, sandboxTenant } from './sandboxes.js';
