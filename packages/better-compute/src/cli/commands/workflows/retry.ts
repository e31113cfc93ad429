/** `workflows retry WF`: workflows.retry. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'workflows retry',
  group: 'Nodes',
  summary: 'Run a failed workflow again from its failed step (workflows.retry)',
  target: 'token',
  calls: ['workflows.retry'],
  positionals: [{ name: 'workflow', description: 'The workflow id', required: true, kind: 'workflow' }],
  examples: ['better-compute workflows retry wf_01k…'],
  async run({ args, api }) {
    return (await api()).call('workflows.retry', { workflowId: args.workflow });
  },
});
