/**
 * THE CONTRACT: every API method, once. Routes, the client, `api --list`, `help --json` and IAM's
 * action catalog derive from this table. Import it lazily: it loads zod.
 */
import type { AnyMethod } from '../contract.js';
import { tableOf } from '../group.js';
import { systemGroup } from './system.js';
import { auditGroup } from './audit.js';
import { eventsGroup } from './events.js';
import { sitesGroup } from './sites.js';
import { projectsGroup } from './projects.js';
import { poolsGroup } from './pools.js';
import { quotasGroup } from './quotas.js';
import { driversGroup } from './drivers.js';
import { nodesGroup } from './nodes.js';
import { joinTokensGroup } from './join-tokens.js';
import { siteTokensGroup } from './site-tokens.js';
import { joinRequestsGroup } from './join-requests.js';
import { inventoryGroup } from './inventory.js';
import { capacityGroup } from './capacity.js';
import { reservationsGroup } from './reservations.js';
import { usageGroup } from './usage.js';
import { offersGroup } from './offers.js';
import { commandsGroup } from './commands.js';
import { commandBatchesGroup } from './batches.js';
import { confirmationsGroup } from './confirmations.js';
import { releasesGroup } from './releases.js';
import { fleetGroup } from './fleet.js';
import { rolloutsGroup } from './rollouts.js';
import { workflowsGroup } from './workflows.js';
import { webhooksGroup } from './webhooks.js';
import { imagesGroup } from './images.js';
import { flavorsGroup } from './flavors.js';
import { instancesGroup } from './instances.js';
import { nodeSshCertsGroup } from './ssh-certs.js';
import { tunnelsGroup } from './tunnels.js';
import { secretsGroup } from './secrets.js';
import { profilesGroup } from './profiles.js';
import { providerAccountsGroup } from './provider-accounts.js';
import { metalGroup } from './metal.js';
import {
  sandboxesGroup,
  sandboxSnapshotsGroup,
  sandboxTemplatesGroup,
  sandboxVolumesGroup,
} from './sandboxes.js';

/** Every group of the table, for the modules that implement them. */
export {
  systemGroup,
  auditGroup,
  eventsGroup,
  sitesGroup,
  projectsGroup,
  poolsGroup,
  offersGroup,
  quotasGroup,
  driversGroup,
  nodesGroup,
  joinTokensGroup,
  siteTokensGroup,
  joinRequestsGroup,
  inventoryGroup,
  capacityGroup,
  reservationsGroup,
  usageGroup,
  commandsGroup,
  commandBatchesGroup,
  confirmationsGroup,
  releasesGroup,
  fleetGroup,
  rolloutsGroup,
  workflowsGroup,
  webhooksGroup,
  imagesGroup,
  flavorsGroup,
  instancesGroup,
  nodeSshCertsGroup,
  tunnelsGroup,
  secretsGroup,
  profilesGroup,
  providerAccountsGroup,
  metalGroup,
  sandboxTemplatesGroup,
  sandboxesGroup,
  sandboxSnapshotsGroup,
  sandboxVolumesGroup,
};
export * from './common.js';
export { eventSchema } from './events.js';
export { auditCheckpointSchema } from './audit.js';
export { gpuInventorySchema, inventorySchema } from './inventory.js';
export { nodeSchema, nodeState, taintSchema } from './nodes.js';
export {
  reservationSchema,
  reservationState,
  endReason,
  bindingSchema,
  MAX_RESERVATION_SECONDS,
} from './reservations.js';
export { SYSTEM_TAINT_PREFIX } from './sites.js';
export { USAGE_METERS } from './usage.js';
export {
  MAX_WEBHOOK_PATTERNS,
  webhookDeliverySchema,
  webhookEventPattern,
  webhookSchema,
} from './webhooks.js';
export { imageSchema } from './images.js';
export {
  FLEET_ADMIN_ACTION,
  FLEET_CONFIG_KIND,
  FLEET_CONFIG_VERSION,
  FLEET_DOCUMENT_MAX_BYTES,
  FLEET_MAX_OBJECTS,
  fleetConfigSchema,
  fleetConfigJsonSchema,
  fleetChangeSchema,
  fleetCallSchema,
  fleetPlanSchema,
  fleetStatusSchema,
  fleetObjectKind,
  type FleetConfig,
  type FleetConfigInput,
  type FleetSite,
  type FleetPool,
  type FleetFlavor,
  type FleetTemplate,
  type FleetProviderAccount,
  type FleetChange,
  type FleetCall,
  type FleetPlan,
  type FleetStatus,
  type FleetObjectKind,
} from './fleet.js';
export { flavorSchema } from './flavors.js';
export { instanceSchema, instanceState } from './instances.js';
export { sshCertSchema, UNIX_ACCOUNT, SSH_CERT_MAX_MINUTES, SSH_CERT_MIN_MINUTES } from './ssh-certs.js';
export { TUNNEL_TICKET_SECONDS, NODE_CONSOLE_ACTION, INSTANCE_EXEC_ACTION } from './tunnels.js';
export {
  sandboxSchema,
  sandboxState,
  sandboxTemplateSchema,
  sandboxSnapshotSchema,
  sandboxVolumeSchema,
  SANDBOX_EXEC_DEFAULT_MINUTES,
  SANDBOX_EXEC_MAX_MINUTES,
  SANDBOX_EXEC_MIN_MINUTES,
  SANDBOX_ATTACH_ACTION,
} from './sandboxes.js';
export {
  MAX_SECRET_BYTES,
  MAX_SECRETS_PER_TENANT,
  SECRETS_DELETE_ACTION,
  SECRETS_USE_ACTION,
  SECRETS_WRITE_ACTION,
  secretSchema,
  secretValue,
} from './secrets.js';
export {
  MAX_PROFILE_PARTITIONS,
  MAX_PROFILE_USER_DATA_BYTES,
  MAX_PROFILES_PER_TENANT,
  PROFILE_FILESYSTEMS,
  PROFILES_WRITE_ACTION,
  profileDocument,
  profileSchema,
  type ProfileDocument,
} from './profiles.js';
export {
  MAX_PROVIDER_ACCOUNT_HOSTS,
  MAX_PROVIDER_ACCOUNTS_PER_TENANT,
  PROVIDER_ACCOUNTS_BOOTSTRAP_ACTION,
  PROVIDER_ACCOUNTS_OFFERS_ACTION,
  PROVIDER_ACCOUNTS_WRITE_ACTION,
  PROVIDER_DRIVERS,
  credentialReference,
  providerAccountConfig,
  providerAccountSchema,
  type ProviderAccountConfig,
} from './provider-accounts.js';
export {
  COMMAND_KINDS,
  ROLLOUT_COMMAND_KINDS,
  METAL_COMMAND_KINDS,
  COMMAND_OUTPUT_LIMIT,
  commandSchema,
  commandState,
} from './commands.js';
export { workflowSchema, workflowState } from './workflows.js';
export {
  batchSchema,
  batchState,
  batchMemberSchema,
  scopeEntrySchema,
  DEFAULT_BATCH_HOURS,
  MAX_BATCH_HOURS,
  MAX_CREATE_LEAVES,
  MAX_SCOPE_PAGE,
} from './batches.js';
export {
  type ConfirmationCall,
  type ConfirmationTicket,
  confirmationSchema,
  confirmationState,
  CONFIRMATION_APPROVED_SECONDS,
  CONFIRMATION_PENDING_SECONDS,
} from './confirmations.js';
export {
  MAX_BULK_MACHINES,
  METAL_BULK_DESTRUCTIVE,
  METAL_BULK_VERBS,
  METAL_PROVISION_ACTION,
  metalBulkVerb,
  metalInventorySchema,
  metalCleaningSchema,
  type MetalCleaning,
  metalMachineSchema,
  type MetalInventory,
  metalPowerAction,
  metalState,
  pxeDiscoverySchema,
} from './metal.js';
export { releaseSchema, RELEASE_UPLOAD_CHUNK_BYTES } from './releases.js';
export {
  rolloutSchema,
  rolloutState,
  DEFAULT_HEALTH_TIMEOUT_SECONDS,
  MAX_ROLLOUT_NODES,
  MAX_ROLLOUT_WAVES,
} from './rollouts.js';

export const methods = {
  ...tableOf(systemGroup),
  ...tableOf(eventsGroup),
  ...tableOf(sitesGroup),
  ...tableOf(projectsGroup),
  ...tableOf(poolsGroup),
  ...tableOf(offersGroup),
  ...tableOf(quotasGroup),
  ...tableOf(driversGroup),
  ...tableOf(nodesGroup),
  ...tableOf(nodeSshCertsGroup),
  ...tableOf(joinTokensGroup),
  ...tableOf(siteTokensGroup),
  ...tableOf(joinRequestsGroup),
  ...tableOf(inventoryGroup),
  ...tableOf(capacityGroup),
  ...tableOf(reservationsGroup),
  ...tableOf(usageGroup),
  ...tableOf(webhooksGroup),
  ...tableOf(commandsGroup),
  ...tableOf(commandBatchesGroup),
  ...tableOf(confirmationsGroup),
  ...tableOf(releasesGroup),
  ...tableOf(fleetGroup),
  ...tableOf(rolloutsGroup),
  ...tableOf(workflowsGroup),
  ...tableOf(imagesGroup),
  ...tableOf(flavorsGroup),
  ...tableOf(instancesGroup),
  ...tableOf(tunnelsGroup),
  ...tableOf(secretsGroup),
  ...tableOf(profilesGroup),
  ...tableOf(providerAccountsGroup),
  ...tableOf(metalGroup),
  ...tableOf(sandboxTemplatesGroup),
  ...tableOf(sandboxesGroup),
  ...tableOf(sandboxSnapshotsGroup),
  ...tableOf(sandboxVolumesGroup),
  ...tableOf(auditGroup),
} as const satisfies Record<string, AnyMethod>;

export type MethodTable = typeof methods;
export type MethodName = keyof MethodTable;

/** Every method, in table order. */
export const methodList: readonly AnyMethod[] = Object.values(methods);
