/** `nodes uncordon NODE [--reason] [--if-version N]`: nodes.uncordon. */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';

export default defineCommand({
  name: 'nodes uncordon',
  group: 'Nodes',
  summary: 'Uncordon a cordoned or drained node: it takes new reservations again (nodes.uncordon)',
  target: 'token',
  calls: ['nodes.uncordon'],
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
    'better-compute nodes uncordon node_01k…',
    'better-compute nodes uncordon node_01k… --if-version 3 --reason maintenance',
  ],
  async run({ args, flags, api }) {
    return (await api()).call(
      'nodes.uncordon',
      defined({ nodeId: args.node, reason: flags.reason, ifVersion: flags.ifVersion }),
    );
  },
});
