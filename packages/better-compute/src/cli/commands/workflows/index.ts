/** The workflows commands: read and steer a node's workflows (they are started through the API). */
import type { AnyCommand } from '../../define.js';
import workflowsList from './list.js';
import workflowsGet from './get.js';
import workflowsAbort from './abort.js';
import workflowsPause from './pause.js';
import workflowsResume from './resume.js';
import workflowsRetry from './retry.js';

export const workflowsCommands: readonly AnyCommand[] = [
  workflowsList,
  workflowsGet,
  workflowsAbort,
  workflowsPause,
  workflowsResume,
  workflowsRetry,
] as readonly AnyCommand[];
