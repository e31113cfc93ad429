/** `inventory get NODE`: inventory.get, the node's current hardware inventory. */
import { defineCommand } from '../../../define.js';

export default defineCommand({
  name: 'inventory get',
  group: 'Nodes',
  summary: 'A node’s current hardware inventory (inventory.get)',
  target: 'token',
  calls: ['inventory.get'],
  positionals: [{ name: 'node', description: 'The node id', required: true, kind: 'node' }],
  examples: [
    'better-compute inventory get node_01k…',
    'better-compute inventory get node_01k… --query inventory.gpus',
  ],
  async run({ args, api }) {
    return (await api()).call('inventory.get', { nodeId: args.node });
  },
});
