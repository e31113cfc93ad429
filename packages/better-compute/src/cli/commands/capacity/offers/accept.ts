/** `offers accept POOL`: answer an offer another tenant made to yours. */
import { defineCommand } from '../../../define.js';

export default defineCommand({
  name: 'offers accept',
  group: 'Capacity',
  summary: 'Accept a pool’s offer: it joins your pools list and takes your reservations (offers.accept)',
  target: 'token',
  calls: ['offers.accept'],
  positionals: [{ name: 'pool', description: 'The pool offered, pool_…', required: true, kind: 'pool' }],
  examples: ['better-compute offers accept pool_01k…'],
  async run({ args, api }) {
    return (await api()).call('offers.accept', { poolId: args.pool });
  },
});
