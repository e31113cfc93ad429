/** `provider-accounts delete ACCOUNT [--if-version N]`: providerAccounts.delete; its nodes stay nodes. */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';
import { accountPositional } from './shared.js';

export default defineCommand({
  name: 'provider-accounts delete',
  group: 'Fleet',
  summary: 'Delete a provider account with no bootstrap running; its nodes stay (providerAccounts.delete)',
  target: 'token',
  calls: ['providerAccounts.delete'],
  positionals: [accountPositional],
  flags: { ifVersion: ifVersionFlag },
  examples: ['better-compute provider-accounts delete pacct_01k… --if-version 3'],
  async run({ args, flags, api }) {
    return (await api()).call(
      'providerAccounts.delete',
      defined({ accountId: args.account, ifVersion: flags.ifVersion }),
    );
  },
});
