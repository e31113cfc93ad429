/** `pools get POOL`. */
import { defineCommand } from '../../../define.js';

export default defineCommand({
  name: 'pools get',
  group: 'Capacity',
  summary: 'Show a pool (pools.get)',
  target: 'token',
  calls: ['pools.get'],
  positionals: [{ name: 'pool', description: 'The pool, pool_…', required: true, kind: 'pool' }],
  examples: ['better-compute pools get pool_01k…'],
  async run({ args, api }) {
    return (await api()).call('pools.get', { poolId: args.pool });
  },
});
