/** The sandbox-template commands, in the order help lists them. */
import type { AnyCommand } from '../../define.js';
import create from './create.js';
import update from './update.js';
import remove from './delete.js';

export const sandboxTemplateCommands: readonly AnyCommand[] = [
  create,
  update,
  remove,
] as readonly AnyCommand[];
