/**
 * The `workflows` group: the steps of a node-level operation, run by a controller as jobs. A
 * workflow is running, paused, failed, succeeded or aborted; every transition is an event.
 * `workflows.create` starts one (operators; node maintenance in this release: drain, run a
 * maintenance script, uncordon); the CLI reads and steers them.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';
import { scriptName } from './commands.js';

/** Node maintenance (operators), and the instance workflows the instances methods start. */
const workflowKind = z.enum([
  'node.maintenance',
  'instance.create',
  'instance.start',
  'instance.stop',
  'instance.resize',
  'instance.delete',
  'sandbox.create',
  'sandbox.certify',
  'sandbox.delete',
  'sandbox.snapshot',
  'sandbox.snapshot-delete',
  'volume.create',
  'volume.resize',
  'volume.delete',
  'node.update',
  'metal.verify',
  'metal.inspect',
  'metal.clean',
  'metal.power',
]);
export const workflowState = z.enum(['running', 'paused', 'failed', 'succeeded', 'aborted']);
const workflowStepState = z.enum(['pending', 'running', 'succeeded', 'failed', 'skipped']);

const workflowStepSchema = z.object({
  name: z.string(),
  kind: z.enum([
    'node.drain',
    'node.wait-drained',
    'command',
    'node.uncordon',
    'node.wait-version',
    'node.no-failed-commands',
    'wait',
  ]),
  state: workflowStepState,
  attempt: z.number().int(),
  /** The command the step ran, for a command step that started. */
  commandId: z.string().nullable(),
  /** For a command step: the kind of command it queues. */
  commandKind: z.string().nullable().optional(),
  error: z.string().nullable(),
  startedAt: isoTime.nullable(),
  finishedAt: isoTime.nullable(),
});

export const workflowSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  nodeId: z.string(),
  kind: workflowKind,
  /** The instance an instance workflow changes. */
  instanceId: z.string().nullable().optional(),
  state: workflowState,
  currentStep: z.number().int(),
  steps: z.array(workflowStepSchema),
  reason: z.string().nullable(),
  createdAt: isoTime,
  updatedAt: isoTime,
  finishedAt: isoTime.nullable(),
});

const workflowResource = (input: { workflowId: string }) => ({
  type: 'compute-workflow',
  id: input.workflowId,
});
const ref = z.object({ tenantId, workflowId: idOf('workflow') }).strict();

const workflowsList = method({
  kind: 'query',
  summary: 'A node’s workflows, newest first',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-node', id: input.nodeId }),
  input: z
    .object({
      tenantId,
      nodeId: idOf('node'),
      state: workflowState.optional().describe('Only workflows in this state; all when omitted'),
      ...pageInputById('workflow'),
    })
    .strict(),
  output: pageOf(workflowSchema),
});

const workflowsGet = method({
  kind: 'query',
  summary: 'One workflow with its steps, their commands and timings',
  tenantScoped: true,
  resource: workflowResource,
  input: ref,
  output: workflowSchema,
});

const workflowsCreate = method({
  kind: 'mutation',
  summary: 'Start node maintenance: drain the node, run a maintenance script, uncordon it',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-node', id: input.nodeId }),
  input: z
    .object({
      tenantId,
      nodeId: idOf('node'),
      kind: z
        .literal('node.maintenance')
        .default('node.maintenance')
        .describe('The workflow: node.maintenance (drain, run the script, uncordon), the only one'),
      script: scriptName.describe(
        'The maintenance script shipped with the daemon to run once the node is drained, by name',
      ),
      reason: z
        .string()
        .max(500)
        .optional()
        .describe('Why the maintenance runs, kept on the workflow (up to 500 characters)'),
    })
    .strict(),
  output: workflowSchema,
});

function steer(summary: string) {
  return method({
    kind: 'mutation',
    summary,
    tenantScoped: true,
    resource: workflowResource,
    input: ref,
    output: workflowSchema,
  });
}

const workflowsAbort = steer('Abort a workflow: no further step runs, and a running command is cancelled');
const workflowsPause = steer('Pause a running workflow after its current step');
const workflowsResume = steer('Resume a paused workflow');
const workflowsRetry = steer('Run a failed workflow again from its failed step');

/** The `workflows` group: each method's name, route (`/workflows/…`) and IAM action come from here. */
export const workflowsGroup = defineGroup(
  'workflows',
  { module: 'fleet' },
  {
    list: workflowsList,
    get: workflowsGet,
    create: workflowsCreate,
    abort: workflowsAbort,
    pause: workflowsPause,
    resume: workflowsResume,
    retry: workflowsRetry,
  },
);
