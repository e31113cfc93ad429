/** `pools update POOL [--name] [--description] [--label k=v] [--remove-label KEY] [--if-version N]`. */
import { defineCommand } from '../../../define.js';
import { CliError } from '../../../errors.js';
import { labelUpdate } from '../../shared.js';

export default defineCommand({
  name: 'pools update',
  group: 'Capacity',
  summary: 'Rename, describe or relabel a pool (pools.update)',
  target: 'token',
  calls: ['pools.update'],
  positionals: [{ name: 'pool', description: 'The pool, pool_…', required: true, kind: 'pool' }],
  flags: {
    name: { type: 'string', description: 'A new name', placeholder: 'NAME' },
    description: { type: 'string', description: 'A new description', placeholder: 'TEXT' },
    label: {
      type: 'string',
      repeated: true,
      description: 'The labels, key=value; the labels given replace them all',
      placeholder: 'K=V',
    },
    removeLabel: {
      type: 'string',
      repeated: true,
      description: 'A label key to remove, the other labels staying; remove every key to clear them',
      placeholder: 'KEY',
    },
    ifVersion: {
      type: 'number',
      integer: true,
      min: 1,
      description: 'Apply only at this version (else CONFLICT)',
    },
  },
  examples: [
    'better-compute pools update pool_01k… --name gpu-main-2 --if-version 3',
    'better-compute pools update pool_01k… --remove-label zone,tier',
  ],
  async run({ args, flags, api, commandName }) {
    if (
      flags.name === undefined &&
      flags.description === undefined &&
      flags.label.length === 0 &&
      flags.removeLabel.length === 0
    ) {
      throw new CliError('INVALID_ARGUMENT', 'pools update needs --name, --description or --label', {
        hint: `Run "better-compute help ${commandName}" for its flags and examples; --remove-label KEY removes a label.`,
        details: { field: 'name' },
      });
    }
    const labels = labelUpdate(commandName, flags);
    return (await api()).call('pools.update', {
      poolId: args.pool,
      ...(flags.name !== undefined ? { name: flags.name } : {}),
      ...(flags.description !== undefined ? { description: flags.description } : {}),
      ...(flags.label.length ? { labels } : {}),
      ...(flags.removeLabel.length ? { removeLabels: flags.removeLabel } : {}),
      ...(flags.ifVersion !== undefined ? { ifVersion: flags.ifVersion } : {}),
    });
  },
});
