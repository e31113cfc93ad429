/** `provider-accounts create --config-file PATH [--key K]`: providerAccounts.create from a JSON document. */
import { defineCommand } from '../../define.js';
import { keyFlag, withIdempotencyKey } from '../shared.js';
import { configFileFlag, readAccountConfig } from './shared.js';

export default defineCommand({
  name: 'provider-accounts create',
  group: 'Fleet',
  summary: 'Create a provider account from a JSON document (providerAccounts.create)',
  description:
    'The document names the driver (ssh), its settings (the join URL and the hosts, user@host:port with each host key) and its ' +
    'credentials as secret references (secret://TENANT/sec_…), never a value: a literal credential is refused before anything is sent. ' +
    'See docs/provider-accounts.md.',
  target: 'token',
  calls: ['providerAccounts.create'],
  flags: { configFile: configFileFlag, key: keyFlag },
  examples: [
    'better-compute secrets put rack-key --value-file ~/.ssh/rack_ed25519',
    'better-compute provider-accounts create --config-file rack.json',
  ],
  async run(context) {
    const { flags, io, api } = context;
    const config = await readAccountConfig(io, flags.configFile);
    const client = await api();
    return withIdempotencyKey(context, flags.key, (idempotencyKey) =>
      client.call('providerAccounts.create', { config: config as never, idempotencyKey }),
    );
  },
});
