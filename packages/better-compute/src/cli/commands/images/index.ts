/** The images commands, in the order help lists them. */
import type { AnyCommand } from '../../define.js';
import imagesList from './list.js';
import imagesGet from './get.js';
import imagesRegister from './register.js';
import imagesPromote from './promote.js';

export const imagesCommands: readonly AnyCommand[] = [
  imagesList,
  imagesGet,
  imagesRegister,
  imagesPromote,
] as readonly AnyCommand[];
