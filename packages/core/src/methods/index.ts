/**
 * THE CONTRACT: every API method, once. Routes, the client, `api --list`, `help --json` and IAM's
 * action catalog derive from this table. Import it lazily: it loads zod.
 */
import type { AnyMethod } from '../contract.js';
import { eventsList } from './events.js';
import { capacityGet, capacityPreview } from './capacity.js';
import { commandsCancel, commandsGet, commandsList, commandsRun } from './commands.js';
import {
  workflowsAbort,
  workflowsCreate,
  workflowsGet,
  workflowsList,
  workflowsPause,
  workflowsResume,
  workflowsRetry,
} from './workflows.js';
import { driversList } from './drivers.js';
import { inventoryDiff, inventoryGet, inventoryHistory } from './inventory.js';
import { joinRequestsApprove, joinRequestsList, joinRequestsReject } from './join-requests.js';
import { joinTokensCreate, joinTokensList, joinTokensRevoke } from './join-tokens.js';
import {
  nodesClaim,
  nodesCordon,
  nodesDelete,
  nodesDrain,
  nodesEvents,
  nodesGet,
  nodesHeartbeat,
  nodesJoin,
  nodesLabel,
  nodesList,
  nodesRetire,
  nodesTaint,
  nodesUncordon,
} from './nodes.js';
import {
  poolsArchive,
  poolsCreate,
  poolsGet,
  poolsList,
  poolsOffer,
  poolsUnoffer,
  poolsUpdate,
} from './pools.js';
import { offersAccept, offersDecline, offersList } from './offers.js';
import { projectsArchive, projectsCreate, projectsGet, projectsList } from './projects.js';
import { quotasGet, quotasSet } from './quotas.js';
import {
  reservationsCreate,
  reservationsExtend,
  reservationsGet,
  reservationsList,
  reservationsRelease,
} from './reservations.js';
import { sitesCreate, sitesDelete, sitesGet, sitesList, sitesUpdate } from './sites.js';
import { usageExport, usageList } from './usage.js';
import { systemRoutes, systemVersion, systemWhoami } from './system.js';

export * from './common.js';
export { eventSchema } from './events.js';
export { COMMAND_KINDS, COMMAND_OUTPUT_LIMIT, commandSchema, commandState } from './commands.js';
export { gpuInventorySchema, inventorySchema } from './inventory.js';
export { nodeSchema, nodeState, taintSchema } from './nodes.js';
export { reservationSchema, bindingSchema, MAX_RESERVATION_SECONDS } from './reservations.js';
export { SYSTEM_TAINT_PREFIX } from './sites.js';

export const methods = {
  'system.version': systemVersion,
  'system.whoami': systemWhoami,
  'system.routes': systemRoutes,
  'events.list': eventsList,
  'sites.list': sitesList,
  'sites.get': sitesGet,
  'sites.create': sitesCreate,
  'sites.update': sitesUpdate,
  'sites.delete': sitesDelete,
  'projects.list': projectsList,
  'projects.get': projectsGet,
  'projects.create': projectsCreate,
  'projects.archive': projectsArchive,
  'pools.list': poolsList,
  'pools.get': poolsGet,
  'pools.create': poolsCreate,
  'pools.update': poolsUpdate,
  'pools.archive': poolsArchive,
  'pools.offer': poolsOffer,
  'pools.unoffer': poolsUnoffer,
  'offers.list': offersList,
  'offers.accept': offersAccept,
  'offers.decline': offersDecline,
  'quotas.get': quotasGet,
  'quotas.set': quotasSet,
  'drivers.list': driversList,
  'nodes.list': nodesList,
  'nodes.get': nodesGet,
  'nodes.events': nodesEvents,
  'nodes.cordon': nodesCordon,
  'nodes.uncordon': nodesUncordon,
  'nodes.drain': nodesDrain,
  'nodes.label': nodesLabel,
  'nodes.taint': nodesTaint,
  'nodes.retire': nodesRetire,
  'nodes.delete': nodesDelete,
  'nodes.join': nodesJoin,
  'nodes.claim': nodesClaim,
  'nodes.heartbeat': nodesHeartbeat,
  'joinTokens.create': joinTokensCreate,
  'joinTokens.list': joinTokensList,
  'joinTokens.revoke': joinTokensRevoke,
  'joinRequests.list': joinRequestsList,
  'joinRequests.approve': joinRequestsApprove,
  'joinRequests.reject': joinRequestsReject,
  'inventory.get': inventoryGet,
  'inventory.history': inventoryHistory,
  'inventory.diff': inventoryDiff,
  'capacity.get': capacityGet,
  'capacity.preview': capacityPreview,
  'reservations.create': reservationsCreate,
  'reservations.get': reservationsGet,
  'reservations.list': reservationsList,
  'reservations.extend': reservationsExtend,
  'reservations.release': reservationsRelease,
  'usage.list': usageList,
  'usage.export': usageExport,
  'commands.list': commandsList,
  'commands.get': commandsGet,
  'commands.cancel': commandsCancel,
  'commands.run': commandsRun,
  'workflows.list': workflowsList,
  'workflows.get': workflowsGet,
  'workflows.create': workflowsCreate,
  'workflows.abort': workflowsAbort,
  'workflows.pause': workflowsPause,
  'workflows.resume': workflowsResume,
  'workflows.retry': workflowsRetry,
} as const satisfies Record<string, AnyMethod>;

export type MethodTable = typeof methods;
export type MethodName = keyof MethodTable;

/** Every method, in table order. */
export const methodList: readonly AnyMethod[] = Object.values(methods);
