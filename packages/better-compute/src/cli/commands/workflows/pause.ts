/** `workflows pause WF`: workflows.pause. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'workflows pause',
  group: 'Nodes',
  summary: 'Pause a running workflow after its current step (workflows.pause)',
  target: 'token',
  calls: ['workflows.pause'],
  positionals: [{ name: 'workflow', description: 'The workflow id', required: true, kind: 'workflow' }],
  examples: ['better-compute workflows pause wf_01k…'],
  async run({ args, api }) {
    return (await api()).call('workflows.pause', { workflowId: args.workflow });
  },
});
