/**
 * The destructive-batch quorum (`@better-compute/core/quorum`): approver keys, scope leaves and
 * their RFC 6962 tree, approvals and approver sets, checked alike by the server, the CLI and the
 * daemon. Node only (node:crypto); the browser-safe part, the kinds table, is also exported from
 * the core's main entry. docs/quorum.md describes the formats.
 */
export * from './bytes.js';
export * from './kinds.js';
export * from './keys.js';
export * from './scope.js';
export * from './approvals.js';
export * from './approver-set.js';
export * from './attachment.js';
