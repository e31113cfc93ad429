/** The confirmations commands: what a person reads and decides of their agents' held calls. */
import type { AnyCommand } from '../../define.js';
import confirmationsList from './list.js';
import confirmationsGet from './get.js';
import confirmationsApprove from './approve.js';
import confirmationsDecline from './decline.js';

export const confirmationsCommands: readonly AnyCommand[] = [
  confirmationsList,
  confirmationsGet,
  confirmationsApprove,
  confirmationsDecline,
] as readonly AnyCommand[];
