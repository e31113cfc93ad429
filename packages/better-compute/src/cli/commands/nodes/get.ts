/** `nodes get NODE`: nodes.get, the node with its GPUs. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'nodes get',
  group: 'Nodes',
  summary: 'Show a node with its GPUs (nodes.get)',
  target: 'token',
  calls: ['nodes.get'],
  positionals: [{ name: 'node', description: 'The node id', required: true, kind: 'node' }],
  examples: ['better-compute nodes get node_01k…', 'better-compute nodes get node_01k… --query gpus'],
  async run({ args, api }) {
    return (await api()).call('nodes.get', { nodeId: args.node });
  },
});
