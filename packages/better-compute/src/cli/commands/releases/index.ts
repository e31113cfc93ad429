/** The releases commands (the API group `releases`), in the order help lists them. */
import type { AnyCommand } from '../../define.js';
import releasesGet from './get.js';
import releasesList from './list.js';
import releasesRegister from './register.js';

export const releasesCommands: readonly AnyCommand[] = [
  releasesRegister,
  releasesList,
  releasesGet,
] as readonly AnyCommand[];
