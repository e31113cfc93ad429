/**
 * @better-compute/console-kit: the view models a console is built on, with no framework: resource
 * stores, the live event stream, permission-aware actions, the pages' views (`createBatchesView`, `createConfirmationsView`),
 * and React hooks under `/react`. Every store has `subscribe(listener)` and `get()`.
 */
export { Subscribable, ValueStore, type Listener, type Readable } from './subscribable.js';
export {
  DetailStore,
  ListStore,
  asClientError,
  isGone,
  type DetailState,
  type ListState,
  type ListStoreOptions,
  type LoadStatus,
  type Page,
} from './stores.js';
export {
  backoffDelay,
  isRefusalStatus,
  watchEvents,
  type EventWatch,
  type WatchEventsOptions,
  type WatchEventsState,
  type WatchEventsStatus,
} from './watch-events.js';
export {
  actionsFor,
  describeAction,
  type ActionDescription,
  type ActionResource,
  type ActionsForOptions,
} from './actions.js';
export {
  createPermissions,
  checkKey,
  MAX_PERMISSION_BATCH,
  type PermissionAnswer,
  type PermissionCheck,
  type Permissions,
  type PermissionsOptions,
} from './permissions.js';
export {
  applyEvent,
  startLiveConsole,
  type CapacityPool,
  type ComputeEvent,
  type ComputeNode,
  type LiveConsole,
  type LiveConsoleOptions,
  type Pool,
  type Reservation,
  type TrackedStore,
} from './live.js';
export {
  approveCommand,
  BATCH_FILTERS,
  BATCH_MEMBERS_PAGE,
  BATCH_SCOPE_CAP,
  BATCH_SCOPE_PAGE,
  countdownText,
  createBatchesView,
  describeBatch,
  groupMembers,
  groupScope,
  isBatchFilter,
  secondsLeft,
  type Batch,
  type BatchDetails,
  type BatchFilter,
  type BatchMember,
  type BatchScopeEntry,
  type ApprovalLine,
  type BatchState,
  type BatchesView,
  type BatchesViewOptions,
  type MemberGroup,
  type MemberLine,
  type ScopeGroup,
  type ScopeLine,
} from './batches.js';
export {
  CONFIRMATION_FILTERS,
  confirmationSecondsLeft,
  createConfirmationsView,
  describeConfirmation,
  isConfirmationFilter,
  isApprovable,
  isDeclinable,
  type Confirmation,
  type ConfirmationFilter,
  type ConfirmationState,
  type ConfirmationText,
  type ConfirmationsView,
  type ConfirmationsViewOptions,
} from './confirmations.js';
export {
  ActionRunner,
  bindReact,
  useAction,
  useDetail,
  useList,
  usePermission,
  useStore,
  type ActionState,
  type ReactLike,
  type UseActionResult,
} from './hooks.js';
