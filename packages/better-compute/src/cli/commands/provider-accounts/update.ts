/** `provider-accounts update ACCOUNT --config-file PATH [--if-version N]`: providerAccounts.update. */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';
import { accountPositional, configFileFlag, readAccountConfig } from './shared.js';

export default defineCommand({
  name: 'provider-accounts update',
  group: 'Fleet',
  summary: 'Replace a provider account’s document, as its next version (providerAccounts.update)',
  target: 'token',
  calls: ['providerAccounts.update'],
  positionals: [accountPositional],
  flags: { configFile: configFileFlag, ifVersion: ifVersionFlag },
  examples: ['better-compute provider-accounts update pacct_01k… --config-file rack.json --if-version 2'],
  async run({ args, flags, io, api }) {
    const config = await readAccountConfig(io, flags.configFile);
    return (await api()).call(
      'providerAccounts.update',
      defined({ accountId: args.account, config: config as never, ifVersion: flags.ifVersion }),
    );
  },
});
