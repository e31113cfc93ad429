/** `pools update POOL [--name] [--description] [--label k=v] [--if-version N]`. */
import { defineCommand } from '../../../define.js';
import { CliError } from '../../../errors.js';
import { keyValues } from '../../shared.js';

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
      description: 'The labels, key=value (repeatable; replaces them all)',
      placeholder: 'K=V',
    },
    ifVersion: {
      type: 'number',
      integer: true,
      min: 1,
      description: 'Apply only at this version (else CONFLICT)',
    },
  },
  examples: ['better-compute pools update pool_01k… --name gpu-main-2 --if-version 3'],
  async run({ args, flags, api, commandName }) {
    if (flags.name === undefined && flags.description === undefined && flags.label.length === 0) {
      throw new CliError('INVALID_ARGUMENT', 'pools update needs --name, --description or --label', {
        details: { field: 'name' },
      });
    }
    return (await api()).call('pools.update', {
      poolId: args.pool,
      ...(flags.name !== undefined ? { name: flags.name } : {}),
      ...(flags.description !== undefined ? { description: flags.description } : {}),
      ...(flags.label.length ? { labels: keyValues(commandName, 'label', flags.label) } : {}),
      ...(flags.ifVersion !== undefined ? { ifVersion: flags.ifVersion } : {}),
    });
  },
});
