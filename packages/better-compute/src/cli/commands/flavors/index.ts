/** The flavors commands, in the order help lists them. */
import type { AnyCommand } from '../../define.js';
import flavorsList from './list.js';
import flavorsCreate from './create.js';
import flavorsUpdate from './update.js';
import flavorsDelete from './delete.js';

export const flavorsCommands: readonly AnyCommand[] = [
  flavorsList,
  flavorsCreate,
  flavorsUpdate,
  flavorsDelete,
] as readonly AnyCommand[];
