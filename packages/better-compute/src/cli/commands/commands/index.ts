/** The commands commands: read and cancel what the control plane asked a node to do (no `commands run`). */
import type { AnyCommand } from '../../define.js';
import commandsList from './list.js';
import commandsGet from './get.js';
import commandsCancel from './cancel.js';

export const commandsCommands: readonly AnyCommand[] = [
  commandsList,
  commandsGet,
  commandsCancel,
] as readonly AnyCommand[];
