/** The releases commands (the API group `releases`), in the order help lists them. */
import type { AnyCommand } from '../../define.js';
import releasesGet from './get.js';
import releasesList from './list.js';
import releasesRegister from './register.js';
import releasesRotatePins from './rotate-pins.js';
import releasesUpload from './upload.js';

export const releasesCommands: readonly AnyCommand[] = [
  releasesRegister,
  releasesUpload,
  releasesList,
  releasesGet,
  releasesRotatePins,
] as readonly AnyCommand[];
