/** `provider-accounts offers ACCOUNT [--hosts H,…]`: providerAccounts.offers, what each host can supply. */
import { defineCommand } from '../../define.js';
import { defined } from '../shared.js';
import { accountPositional, hostsFlag } from './shared.js';

export default defineCommand({
  name: 'provider-accounts offers',
  group: 'Fleet',
  summary:
    'Ask the account’s hosts for their cores, memory and GPUs, and whether each is a node (providerAccounts.offers)',
  description:
    'The ssh driver connects to each host with the account’s key (OpenSSH, the host key checked against its pin) and reports ' +
    'what it finds; a host that cannot be asked is a row with reachable false and the reason.',
  target: 'token',
  calls: ['providerAccounts.offers'],
  positionals: [accountPositional],
  flags: { hosts: hostsFlag },
  examples: [
    'better-compute provider-accounts offers pacct_01k…',
    'better-compute provider-accounts offers pacct_01k… --hosts root@10.0.0.5:22 --query offers[0].gpus',
  ],
  async run({ args, flags, api }) {
    const hosts = flags.hosts.length > 0 ? flags.hosts : undefined;
    return (await api()).call('providerAccounts.offers', defined({ accountId: args.account, hosts }));
  },
});
