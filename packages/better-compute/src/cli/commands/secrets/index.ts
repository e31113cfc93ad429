/** The secrets commands, in the order help lists them. */
import type { AnyCommand } from '../../define.js';
import secretsPut from './put.js';
import secretsList from './list.js';
import secretsGet from './get.js';
import secretsDelete from './delete.js';

export const secretsCommands: readonly AnyCommand[] = [
  secretsPut,
  secretsList,
  secretsGet,
  secretsDelete,
] as readonly AnyCommand[];
