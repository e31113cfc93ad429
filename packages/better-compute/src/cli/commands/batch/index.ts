/** The batch commands, in the order help lists them: the approver's online commands, then the offline tools. */
import type { AnyCommand } from '../../define.js';
import batchList from './list.js';
import batchShow from './show.js';
import batchApprove from './approve.js';
import batchCreate from './create.js';
import batchMembers from './members.js';
import batchCancel from './cancel.js';
import batchKeygen from './keygen.js';
import batchSign from './sign.js';
import batchSignApprovers from './sign-approvers.js';

export const batchCommands: readonly AnyCommand[] = [
  batchList,
  batchShow,
  batchApprove,
  batchCreate,
  batchMembers,
  batchCancel,
  batchKeygen,
  batchSign,
  batchSignApprovers,
] as readonly AnyCommand[];
