/**
 * What the rest of the server uses of the secrets module: checking references where a resource
 * names them (sandbox templates, sandboxes.create) and opening them where it starts (the gateway).
 */
export {
  checkSecretReferences,
  openSecretEnv,
  parseSecretReference,
  secretsChangedAt,
  type SecretEnvReference,
} from './resolve.js';
export { createSecretSealer, type SecretSealer } from './sealing.js';
