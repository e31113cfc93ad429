/** The capacity commands, in the order help lists them. */
import type { AnyCommand } from '../../define.js';

export const capacityCommands: readonly AnyCommand[] = [];
