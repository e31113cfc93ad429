/** `nodes label NODE KEY=VALUE… [--remove KEY] [--if-version N]`: nodes.label. */
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { assertSetOrRemove, defined, ifVersionFlag, keyValues } from '../shared.js';

export default defineCommand({
  name: 'nodes label',
  group: 'Nodes',
  summary: 'Set or remove a node’s labels (nodes.label)',
  target: 'token',
  calls: ['nodes.label'],
  positionals: [
    { name: 'node', description: 'The node id', required: true, kind: 'node' },
    { name: 'labels', description: 'KEY=VALUE labels to set', variadic: true },
  ],
  flags: {
    remove: {
      type: 'string',
      repeated: true,
      description: 'A label key to remove',
      placeholder: 'KEY',
    },
    ifVersion: ifVersionFlag,
  },
  examples: [
    'better-compute nodes label node_01k… zone=eu-1 rack=r12',
    'better-compute nodes label node_01k… --remove rack --if-version 4',
  ],
  async run({ args, flags, api, commandName }) {
    const set = keyValues(commandName, 'labels', args.labels);
    if (Object.keys(set).length === 0 && flags.remove.length === 0)
      throw new CliError('INVALID_ARGUMENT', 'nodes label needs KEY=VALUE labels to set or --remove KEY', {
        hint: `Run "better-compute help ${commandName}" for its flags and examples.`,
        details: { field: 'labels' },
      });
    assertSetOrRemove(commandName, {
      what: 'label',
      set: Object.keys(set),
      remove: flags.remove,
      removeFlag: 'remove',
    });
    return (await api()).call(
      'nodes.label',
      defined({ nodeId: args.node, set, remove: flags.remove, ifVersion: flags.ifVersion }),
    );
  },
});
