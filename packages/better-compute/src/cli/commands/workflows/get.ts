/** `workflows get WF`: workflows.get, with its steps, their commands and timings. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'workflows get',
  group: 'Nodes',
  summary: 'Show a workflow with its steps, their commands and timings (workflows.get)',
  target: 'token',
  calls: ['workflows.get'],
  positionals: [{ name: 'workflow', description: 'The workflow id', required: true, kind: 'workflow' }],
  examples: ['better-compute workflows get wf_01k…', 'better-compute workflows get wf_01k… --query steps'],
  async run({ args, api }) {
    return (await api()).call('workflows.get', { workflowId: args.workflow });
  },
});
