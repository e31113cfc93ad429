/** The nodes commands (nodes, join-tokens, join-requests, inventory), in the order help lists them. */
import type { AnyCommand } from '../../define.js';
import nodesList from './list.js';
import nodesGet from './get.js';
import nodesEvents from './events.js';
import nodesCordon from './cordon.js';
import nodesUncordon from './uncordon.js';
import nodesDrain from './drain.js';
import nodesLabel from './label.js';
import nodesTaint from './taint.js';
import nodesRetire from './retire.js';
import nodesDelete from './delete.js';
import joinTokensCreate from './join-tokens/create.js';
import joinTokensList from './join-tokens/list.js';
import joinTokensRevoke from './join-tokens/revoke.js';
import joinRequestsList from './join-requests/list.js';
import joinRequestsApprove from './join-requests/approve.js';
import joinRequestsReject from './join-requests/reject.js';
import inventoryGet from './inventory/get.js';
import inventoryHistory from './inventory/history.js';
import inventoryDiff from './inventory/diff.js';

export const nodesCommands: readonly AnyCommand[] = [
  nodesList,
  nodesGet,
  nodesEvents,
  nodesCordon,
  nodesUncordon,
  nodesDrain,
  nodesLabel,
  nodesTaint,
  nodesRetire,
  nodesDelete,
  joinTokensCreate,
  joinTokensList,
  joinTokensRevoke,
  joinRequestsList,
  joinRequestsApprove,
  joinRequestsReject,
  inventoryGet,
  inventoryHistory,
  inventoryDiff,
] as readonly AnyCommand[];
