/** The rollouts commands (the API group `rollouts`), in the order help lists them. */
import type { AnyCommand } from '../../define.js';
import rolloutsCreate from './create.js';
import rolloutsList from './list.js';
import rolloutsGet from './get.js';
import rolloutsPause from './pause.js';
import rolloutsResume from './resume.js';
import rolloutsAbort from './abort.js';

export const rolloutsCommands: readonly AnyCommand[] = [
  rolloutsCreate,
  rolloutsList,
  rolloutsGet,
  rolloutsPause,
  rolloutsResume,
  rolloutsAbort,
] as readonly AnyCommand[];
