/** `pools unoffer POOL --to TENANT`. */
import { isTenantId } from '@better-compute/core';
import { defineCommand } from '../../../define.js';
import { CliError } from '../../../errors.js';

export default defineCommand({
  name: 'pools unoffer',
  group: 'Capacity',
  summary: 'Withdraw a pool’s offer from a tenant (pools.unoffer)',
  target: 'token',
  calls: ['pools.unoffer'],
  positionals: [{ name: 'pool', description: 'The pool, pool_…', required: true, kind: 'pool' }],
  flags: {
    to: { type: 'string', required: true, description: 'The tenant', placeholder: 'TENANT' },
    ifVersion: {
      type: 'number',
      integer: true,
      min: 1,
      description: 'Apply only at this version (else CONFLICT)',
    },
  },
  examples: ['better-compute pools unoffer pool_01k… --to acme'],
  async run({ args, flags, api }) {
    if (!isTenantId(flags.to)) {
      throw new CliError('INVALID_ARGUMENT', `--to must be a tenant id such as acme (got "${flags.to}")`, {
        details: { field: 'to' },
      });
    }
    return (await api()).call('pools.unoffer', {
      poolId: args.pool,
      offerTenantId: flags.to,
      ...(flags.ifVersion !== undefined ? { ifVersion: flags.ifVersion } : {}),
    });
  },
});
