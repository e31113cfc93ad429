/** `pools archive POOL`: it takes no new reservations and no new nodes. */
import { defineCommand } from '../../../define.js';

export default defineCommand({
  name: 'pools archive',
  group: 'Capacity',
  summary: 'Archive a pool: no new reservations or nodes; its join tokens are revoked (pools.archive)',
  target: 'token',
  calls: ['pools.archive'],
  positionals: [{ name: 'pool', description: 'The pool, pool_…', required: true, kind: 'pool' }],
  flags: {
    ifVersion: {
      type: 'number',
      integer: true,
      min: 1,
      description: 'Apply only at this version (else CONFLICT)',
    },
  },
  examples: ['better-compute pools archive pool_01k…'],
  async run({ args, flags, api }) {
    return (await api()).call('pools.archive', {
      poolId: args.pool,
      ...(flags.ifVersion !== undefined ? { ifVersion: flags.ifVersion } : {}),
    });
  },
});
