/** `offers decline POOL`: answer an offer another tenant made to yours. */
import { defineCommand } from '../../../define.js';

export default defineCommand({
  name: 'offers decline',
  group: 'Capacity',
  summary: 'Decline a pending offer of a pool (offers.decline)',
  target: 'token',
  calls: ['offers.decline'],
  positionals: [{ name: 'pool', description: 'The pool offered, pool_…', required: true, kind: 'pool' }],
  examples: ['better-compute offers decline pool_01k…'],
  async run({ args, api }) {
    return (await api()).call('offers.decline', { poolId: args.pool });
  },
});
