/** `nodes cordon NODE [--reason] [--if-version N]`: nodes.cordon. */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';

export default defineCommand({
  name: 'nodes cordon',
  group: 'Nodes',
  summary: 'Cordon a node: it keeps its reservations and takes no new ones (nodes.cordon)',
  target: 'token',
  calls: ['nodes.cordon'],
  positionals: [{ name: 'node', description: 'The node id', required: true, kind: 'node' }],
  flags: {
    reason: {
      type: 'string',
      description: 'Why, recorded with the event (up to 500 characters)',
      placeholder: 'TEXT',
    },
    ifVersion: ifVersionFlag,
  },
  examples: [
    'better-compute nodes cordon node_01k…',
    'better-compute nodes cordon node_01k… --if-version 3 --reason maintenance',
  ],
  async run({ args, flags, api }) {
    return (await api()).call(
      'nodes.cordon',
      defined({ nodeId: args.node, reason: flags.reason, ifVersion: flags.ifVersion }),
    );
  },
});
