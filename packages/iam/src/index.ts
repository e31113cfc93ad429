/**
 * better-iam: the embedded Better IAM (DESIGN section 7). `createIam` gives the bridge compute
 * asks, the `/api/iam` handler and the service API; `iamMigrations` its tables.
 */
export { createIam } from './iam.js';
export {
  type CreateIamOptions,
  type Iam,
  type IamLog,
  IAM_LIMITS,
  type IamLimits,
  type SignInResult,
  type CreatedApiKey,
  type DevAccount,
  type DevBootstrap,
  type EnsuredMeters,
  type Meter,
  type MeterDefinition,
} from './api.js';
export { iamMigrations, BUILT_IN_ROLE_IDS, type BuiltInRoleName } from './migrations.js';
export { iamMethods, IAM_ACTIONS, type IamMethodName } from './methods.js';
export { IAM_BASE_PATH, SESSION_COOKIE } from './handler.js';
export { CHANGE_CHANNEL } from './cache.js';
export { DEFAULT_CONFIRM } from './areas/delegations.js';
export { API_KEY_PREFIX, SESSION_TOKEN_PREFIX } from './secrets.js';
export { RESERVED_ACTIONS, type IamResourceRef } from './policy.js';
export { iamSetupExamples, type ExamplePolicy } from './setup-examples.js';
export type {
  ApiKey,
  Binding,
  BindingScope,
  Delegation,
  Group,
  Page,
  Principal,
  Role,
  Session,
  Tenant,
} from './types.js';
