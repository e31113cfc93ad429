/** `nodes retire NODE [--force] [--reason] [--if-version N]`: nodes.retire. */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';

export default defineCommand({
  name: 'nodes retire',
  group: 'Nodes',
  summary: 'Retire a node for good; with --force its running reservations end (nodes.retire)',
  target: 'token',
  calls: ['nodes.retire'],
  positionals: [{ name: 'node', description: 'The node id', required: true, kind: 'node' }],
  flags: {
    force: { type: 'boolean', description: 'End its running reservations (reason node-retired)' },
    reason: { type: 'string', description: 'Why, recorded with the event', placeholder: 'TEXT' },
    ifVersion: ifVersionFlag,
  },
  examples: [
    'better-compute nodes retire node_01k…',
    'better-compute nodes retire node_01k… --force --reason "PSU failed"',
  ],
  async run({ args, flags, api }) {
    return (await api()).call(
      'nodes.retire',
      defined({ nodeId: args.node, force: flags.force, reason: flags.reason, ifVersion: flags.ifVersion }),
    );
  },
});
