/** `provider-accounts get ACCOUNT`: providerAccounts.get, the account, its document and recent bootstraps. */
import { defineCommand } from '../../define.js';
import { accountPositional } from './shared.js';

export default defineCommand({
  name: 'provider-accounts get',
  group: 'Fleet',
  summary: 'Show a provider account, its document and its recent bootstraps (providerAccounts.get)',
  target: 'token',
  calls: ['providerAccounts.get'],
  positionals: [accountPositional],
  examples: [
    'better-compute provider-accounts get pacct_01k…',
    'better-compute provider-accounts get pacct_01k… --query config > account.json',
    'better-compute provider-accounts get pacct_01k… --query bootstraps[0].hosts',
  ],
  async run({ args, api }) {
    return (await api()).call('providerAccounts.get', { accountId: args.account });
  },
});
