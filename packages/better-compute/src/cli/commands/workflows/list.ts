/** `workflows list --node NODE [--state]`: workflows.list, newest first. */
import { defineCommand } from '../../define.js';
import { defined, listResult, pageFlags, pageOf } from '../shared.js';

const WORKFLOW_STATES = ['running', 'paused', 'failed', 'succeeded', 'aborted'] as const;

export default defineCommand({
  name: 'workflows list',
  group: 'Nodes',
  summary: 'A node’s workflows, newest first (workflows.list)',
  target: 'token',
  calls: ['workflows.list'],
  flags: {
    node: { type: 'id', kind: 'node', required: true, description: 'The node whose workflows to list' },
    state: { type: 'string', choices: WORKFLOW_STATES, description: 'Only the workflows in this state' },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: [
    'better-compute workflows list --node node_01k…',
    'better-compute workflows list --node node_01k… --state failed',
  ],
  async run(context) {
    const { flags } = context;
    const page = await (
      await context.api()
    ).call('workflows.list', defined({ nodeId: flags.node, state: flags.state, ...pageOf(flags) }));
    return listResult(context, page, (workflow) => ({
      id: workflow.id,
      kind: workflow.kind,
      state: workflow.state,
      step: `${workflow.currentStep + 1}/${workflow.steps.length} ${workflow.steps[workflow.currentStep]?.name ?? ''}`,
      created: workflow.createdAt,
      finished: workflow.finishedAt ?? '-',
    }));
  },
});
