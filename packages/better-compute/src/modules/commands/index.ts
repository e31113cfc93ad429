/**
 * What the parts of the server outside modules/ use of the commands module: the gateway delivers
 * the commands it queues and records the node sessions it holds.
 */
export {
  advanceCommand,
  COMMANDS_CHANNEL,
  expireCommand,
  failUnsent,
  markSent,
  openCommands,
} from './service.js';
export { nodeSession, recordNodeSession } from './sessions.js';
export type { CommandRow } from './tables.js';
