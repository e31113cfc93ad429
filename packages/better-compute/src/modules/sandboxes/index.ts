/**
 * What the parts of the server outside modules/ use of the sandboxes module: who owns a sandbox
 * and whose it is (the gateway opens a sandbox's secrets as its tenant's); and fleet configuration
 * (modules/fleet-config): templates, read and changed through their own services, with the attach
 * decisions their volumes need.
 */
export { sandboxOwner, sandboxTenant } from './sandboxes.js';
export { attachChecks, createTemplate, deleteTemplate, updateTemplate } from './templates.js';
export { tenantTemplates } from './queries.js';
