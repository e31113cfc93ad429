/** `provider-accounts list`: providerAccounts.list, a table by default. */
import { defineCommand } from '../../define.js';
import { listResult, pageFlags, pageOf } from '../shared.js';
import { accountColumns } from './shared.js';

export default defineCommand({
  name: 'provider-accounts list',
  group: 'Fleet',
  summary: 'List your tenant’s provider accounts: names, drivers, versions and hosts (providerAccounts.list)',
  target: 'token',
  calls: ['providerAccounts.list'],
  flags: { ...pageFlags },
  defaultFormat: 'table',
  examples: [
    'better-compute provider-accounts list',
    'better-compute provider-accounts list --query items[].id',
  ],
  async run({ flags, api, global }) {
    const page = await (await api()).call('providerAccounts.list', pageOf(flags));
    return listResult({ global }, page, accountColumns);
  },
});
