export * from './errors.js';
export * from './ids.js';
export * from './durations.js';
export * from './positions.js';
export * from './terminal-safe.js';
export * from './contract.js';
export * from './group.js';
export * from './bridge.js';
export * from './http.js';
export * from './request-checks.js';
export * from './rate-limit.js';
export * from './outbound-address.js';
export * from './records.js';
export * from './command-envelope.js';
export * from './secrets-shown.js';
export * from './stream-flow.js';
// The destructive kinds only: the rest of the quorum needs node:crypto (`@better-compute/core/quorum`).
export * from './quorum/kinds.js';
export { PRODUCT, VERSION, VERSION_LINE } from './version.js';
