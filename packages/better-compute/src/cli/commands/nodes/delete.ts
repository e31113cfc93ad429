/**
 * `nodes delete NODE --yes [--if-version N]`: nodes.delete. Refuses without --yes before any call;
 * the server refuses a node that is not retired or cordoned, or that holds a reservation.
 */
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';

export default defineCommand({
  name: 'nodes delete',
  group: 'Nodes',
  summary: 'Remove a retired or cordoned node for good; needs --yes (nodes.delete)',
  target: 'token',
  calls: ['nodes.delete'],
  positionals: [{ name: 'node', description: 'The node id', required: true, kind: 'node' }],
  flags: {
    yes: { type: 'boolean', description: 'Confirm: the node is removed for good' },
    ifVersion: ifVersionFlag,
  },
  examples: ['better-compute nodes delete node_01k… --yes'],
  async run({ args, flags, api, commandName }) {
    if (!flags.yes)
      throw new CliError(
        'INVALID_ARGUMENT',
        `nodes delete removes ${args.node} for good: pass --yes to confirm`,
        {
          hint: `Run "better-compute ${commandName} ${args.node} --yes"; the node must be retired, or cordoned and hold no reservation.`,
          details: { field: 'yes' },
        },
      );
    return (await api()).call('nodes.delete', defined({ nodeId: args.node, ifVersion: flags.ifVersion }));
  },
});
