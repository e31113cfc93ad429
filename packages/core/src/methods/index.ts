/**
 * THE CONTRACT: every API method, once. Routes, the client, `api --list`, `help --json` and IAM's
 * action catalog derive from this table. Import it lazily: it loads zod.
 */
import type { AnyMethod } from '../contract.js';
import { tableOf } from '../group.js';
import { systemGroup } from './system.js';
import { eventsGroup } from './events.js';
import { sitesGroup } from './sites.js';
import { projectsGroup } from './projects.js';
import { poolsGroup } from './pools.js';
import { quotasGroup } from './quotas.js';
import { driversGroup } from './drivers.js';
import { nodesGroup } from './nodes.js';
import { joinTokensGroup } from './join-tokens.js';
import { joinRequestsGroup } from './join-requests.js';
import { inventoryGroup } from './inventory.js';
import { capacityGroup } from './capacity.js';
import { reservationsGroup } from './reservations.js';
import { usageGroup } from './usage.js';
import { offersGroup } from './offers.js';
import { webhooksGroup } from './webhooks.js';
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

/** Every group of the table, for the modules that implement them. */
export {
  systemGroup,
  eventsGroup,
  sitesGroup,
  projectsGroup,
  poolsGroup,
  offersGroup,
  quotasGroup,
  driversGroup,
  nodesGroup,
  joinTokensGroup,
  joinRequestsGroup,
  inventoryGroup,
  capacityGroup,
  reservationsGroup,
  usageGroup,
  webhooksGroup,
};
export * from './common.js';
export { eventSchema } from './events.js';
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
export {
  MAX_WEBHOOK_PATTERNS,
  webhookDeliverySchema,
  webhookEventPattern,
  webhookSchema,
} from './webhooks.js';
export { COMMAND_KINDS, COMMAND_OUTPUT_LIMIT, commandSchema, commandState } from './commands.js';

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
  ...tableOf(joinTokensGroup),
  ...tableOf(joinRequestsGroup),
  ...tableOf(inventoryGroup),
  ...tableOf(capacityGroup),
  ...tableOf(reservationsGroup),
  ...tableOf(usageGroup),
  ...tableOf(webhooksGroup),
  // The node daemon's groups, declared method by method (their modules bind them one at a time).
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

/** The methods served by modules that bind them one at a time, not by `implement`. */
export type BoundOneByOne = `commands.${string}` | `workflows.${string}`;

export type MethodTable = typeof methods;
export type MethodName = keyof MethodTable;

/** Every method, in table order. */
export const methodList: readonly AnyMethod[] = Object.values(methods);
