/** `workflows abort WF`: workflows.abort. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'workflows abort',
  group: 'Nodes',
  summary: 'Abort a workflow: no further step runs, a running command is cancelled (workflows.abort)',
  target: 'token',
  calls: ['workflows.abort'],
  positionals: [{ name: 'workflow', description: 'The workflow id', required: true, kind: 'workflow' }],
  examples: ['better-compute workflows abort wf_01k…'],
  async run({ args, api }) {
    return (await api()).call('workflows.abort', { workflowId: args.workflow });
  },
});
