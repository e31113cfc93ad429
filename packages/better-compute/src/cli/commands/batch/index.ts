/** The batch commands, in the order help lists them: the approver's offline tools. */
import type { AnyCommand } from '../../define.js';
import batchKeygen from './keygen.js';
import batchSign from './sign.js';
import batchSignApprovers from './sign-approvers.js';

export const batchCommands: readonly AnyCommand[] = [batchKeygen, batchSign, batchSignApprovers] as readonly AnyCommand[];
