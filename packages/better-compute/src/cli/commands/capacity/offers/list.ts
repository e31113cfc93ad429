/** `offers list [--state]`: pools other tenants offered to yours, pending and accepted. */
import { defineCommand } from '../../../define.js';
import { listResult } from '../../shared.js';

export default defineCommand({
  name: 'offers list',
  group: 'Capacity',
  summary: 'List the pools offered to your tenant: pending offers to accept, and accepted ones (offers.list)',
  target: 'token',
  calls: ['offers.list'],
  flags: {
    state: { type: 'string', choices: ['pending', 'accepted'], description: 'Only offers in this state' },
  },
  defaultFormat: 'table',
  examples: ['better-compute offers list --state pending'],
  async run({ flags, api, global }) {
    const page = await (
      await api()
    ).call('offers.list', { ...(flags.state ? { state: flags.state as 'pending' | 'accepted' } : {}) });
    return listResult({ global }, page, (o) => ({
      pool: o.poolId,
      name: o.poolName,
      owner: o.ownerTenantId,
      class: o.class,
      state: o.state,
      since: o.since,
    }));
  },
});
