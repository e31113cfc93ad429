/** `workflows resume WF`: workflows.resume. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'workflows resume',
  group: 'Nodes',
  summary: 'Resume a paused workflow (workflows.resume)',
  target: 'token',
  calls: ['workflows.resume'],
  positionals: [{ name: 'workflow', description: 'The workflow id', required: true, kind: 'workflow' }],
  examples: ['better-compute workflows resume wf_01k…'],
  async run({ args, api }) {
    return (await api()).call('workflows.resume', { workflowId: args.workflow });
  },
});
