/** `nodes drain NODE [--reason] [--if-version N]`: nodes.drain. */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';

export default defineCommand({
  name: 'nodes drain',
  group: 'Nodes',
  summary: 'Drain a node: no new work; it becomes drained when its last reservation ends (nodes.drain)',
  target: 'token',
  calls: ['nodes.drain'],
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
    'better-compute nodes drain node_01k…',
    'better-compute nodes drain node_01k… --if-version 3 --reason maintenance',
  ],
  async run({ args, flags, api }) {
    return (await api()).call(
      'nodes.drain',
      defined({ nodeId: args.node, reason: flags.reason, ifVersion: flags.ifVersion }),
    );
  },
});
