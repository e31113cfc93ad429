/** The instances commands, in the order help lists them. */
import type { AnyCommand } from '../../define.js';
import instancesList from './list.js';
import instancesGet from './get.js';
import instancesCreate from './create.js';
import instancesStart from './start.js';
import instancesStop from './stop.js';
import instancesDelete from './delete.js';
import instancesResize from './resize.js';
import instancesQuotas from './quotas.js';
import instancesSetQuota from './set-quota.js';

export const instancesCommands: readonly AnyCommand[] = [
  instancesList,
  instancesGet,
  instancesCreate,
  instancesStart,
  instancesStop,
  instancesDelete,
  instancesResize,
  instancesQuotas,
  instancesSetQuota,
] as readonly AnyCommand[];
