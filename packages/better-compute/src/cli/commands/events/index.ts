/** The events commands, in the order help lists them. */
import type { AnyCommand } from '../../define.js';

export const eventsCommands: readonly AnyCommand[] = [];
