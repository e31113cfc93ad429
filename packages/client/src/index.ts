/** @better-compute/client: the typed client, built from the method table. */
export {
  createComputeClient,
  newRequestId,
  readEnvelope,
  MAX_RETRY_WAIT_MS,
  type CallInput,
  type CallOptions,
  type CallOutput,
  type ClientFetch,
  type ComputeClient,
  type ComputeClientBase,
  type ComputeClientGroups,
  type ComputeClientOptions,
} from './client.js';
export {
  ComputeClientError,
  INVALID_RESPONSE_HINT,
  isComputeClientError,
  type ComputeClientErrorOptions,
} from './errors.js';
export { DEFAULT_BASE_PATH, isLoopbackHost, methodRoute, resolveEndpoint } from './endpoint.js';
export { methodFlags, type MethodFlags } from './method-flags.js';
export {
  runWatch,
  type WatchCallbackOptions,
  type WatchedEvent,
  type WatchHandle,
  type WatchOptions,
  type WatchState,
  type WatchStatus,
} from './watch.js';
export {
  SseParser,
  SseLineTooLong,
  DEFAULT_MAX_LINE_LENGTH,
  type SseHandlers,
  type SseMessage,
} from './sse.js';
