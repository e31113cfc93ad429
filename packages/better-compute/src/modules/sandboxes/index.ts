/**
 * What the parts of the server outside modules/ use of the sandboxes module: who owns a sandbox;
 * and fleet configuration (modules/fleet-config): templates, read and changed through their own
 * services, with the attach decisions their volumes need.
 */
export { sandboxOwner } from './sandboxes.js';
export { attachChecks, createTemplate, deleteTemplate, updateTemplate } from './templates.js';
export { tenantTemplates } from './queries.js';
