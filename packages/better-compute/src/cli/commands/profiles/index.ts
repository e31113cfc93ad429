/** The profiles commands, in the order help lists them. */
import type { AnyCommand } from '../../define.js';
import profilesList from './list.js';
import profilesGet from './get.js';
import profilesValidate from './validate.js';
import profilesRender from './render.js';
import profilesCreate from './create.js';
import profilesUpdate from './update.js';
import profilesDelete from './delete.js';

export const profilesCommands: readonly AnyCommand[] = [
  profilesList,
  profilesGet,
  profilesValidate,
  profilesRender,
  profilesCreate,
  profilesUpdate,
  profilesDelete,
] as readonly AnyCommand[];
