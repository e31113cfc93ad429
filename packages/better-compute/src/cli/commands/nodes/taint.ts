/** `nodes taint NODE KEY[=VALUE][:NoSchedule]… [--remove KEY] [--if-version N]`: nodes.taint. */
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { assertSetOrRemove, defined, ifVersionFlag } from '../shared.js';

const EFFECTS = ['NoSchedule'] as const;

export default defineCommand({
  name: 'nodes taint',
  group: 'Nodes',
  summary: 'Add or remove a node’s taints (nodes.taint)',
  target: 'token',
  calls: ['nodes.taint'],
  positionals: [
    { name: 'node', description: 'The node id', required: true, kind: 'node' },
    { name: 'taints', description: 'Taints to add: KEY[=VALUE][:NoSchedule]', variadic: true },
  ],
  flags: {
    remove: {
      type: 'string',
      repeated: true,
      description: 'A taint key to remove',
      placeholder: 'KEY',
    },
    ifVersion: ifVersionFlag,
  },
  examples: [
    'better-compute nodes taint node_01k… gpu-maintenance=true:NoSchedule',
    'better-compute nodes taint node_01k… --remove gpu-maintenance',
  ],
  async run({ args, flags, api, commandName }) {
    const usage = (message: string) =>
      new CliError('INVALID_ARGUMENT', message, {
        hint: `Run "better-compute help ${commandName}" for its flags and examples.`,
        details: { field: 'taints' },
      });
    const add = args.taints.map((item) => {
      const colon = item.lastIndexOf(':');
      const effect = colon === -1 ? 'NoSchedule' : item.slice(colon + 1);
      const pair = colon === -1 ? item : item.slice(0, colon);
      if (!(EFFECTS as readonly string[]).includes(effect))
        throw usage(`a taint's effect must be ${EFFECTS.join(' or ')} (got "${item}")`);
      const eq = pair.indexOf('=');
      const key = eq === -1 ? pair : pair.slice(0, eq);
      if (key === '') throw usage(`a taint is KEY[=VALUE][:NoSchedule] (got "${item}")`);
      return { key, value: eq === -1 ? '' : pair.slice(eq + 1), effect: effect as (typeof EFFECTS)[number] };
    });
    if (add.length === 0 && flags.remove.length === 0)
      throw usage('nodes taint needs taints to add or --remove KEY');
    assertSetOrRemove(commandName, {
      what: 'taint',
      set: add.map((taint) => taint.key),
      remove: flags.remove,
      removeFlag: 'remove',
    });
    return (await api()).call(
      'nodes.taint',
      defined({ nodeId: args.node, add, remove: flags.remove, ifVersion: flags.ifVersion }),
    );
  },
});
