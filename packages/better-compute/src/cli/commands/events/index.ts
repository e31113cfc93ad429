/** The events commands, in the order help lists them. */
import type { AnyCommand } from '../../define.js';
import eventsList from './list.js';
import eventsWatch from './watch.js';
import usageList from './usage/list.js';
import usageExport from './usage/export.js';

export const eventsCommands: readonly AnyCommand[] = [
  eventsList,
  eventsWatch,
  usageList,
  usageExport,
] as readonly AnyCommand[];
