/**
 * `provider-accounts bootstrap ACCOUNT --pool POOL [--hosts H,…] [--wait SECONDS] [--key K]`:
 * providerAccounts.bootstrap. A job runs the project's installer on each host with a fresh join
 * token on its standard input; the command follows it with providerAccounts.get (wait.ts).
 */
import { defineCommand } from '../../define.js';
import { waitFor } from '../../wait.js';
import { defined, keyFlag, withIdempotencyKey } from '../shared.js';
import { accountPositional, hostsFlag } from './shared.js';

interface Bootstrap {
  id: string;
  state: string;
  hosts: { host: string; state: string; nodeId: string | null; error: string | null }[];
}

export default defineCommand({
  name: 'provider-accounts bootstrap',
  group: 'Fleet',
  summary:
    'Turn the account’s hosts into nodes of a pool through bcd’s installer (providerAccounts.bootstrap)',
  description:
    'A job mints a single-use join token for the pool per host and runs the installer (daemon install-script) there over SSH ' +
    'with the token on its standard input. A host that is already a node of your tenant is left as it is, so a bootstrap can be run again.',
  target: 'token',
  calls: ['providerAccounts.bootstrap', 'providerAccounts.get'],
  positionals: [accountPositional],
  flags: {
    pool: { type: 'id', kind: 'pool', required: true, description: 'The pool the hosts join' },
    hosts: hostsFlag,
    wait: {
      type: 'number',
      integer: true,
      min: 0,
      max: 3600,
      default: 0,
      description:
        'Seconds to follow the bootstrap, with progress on stderr; one that fails exits 1 (0 answers at once)',
      placeholder: 'SECONDS',
    },
    key: keyFlag,
  },
  examples: [
    'better-compute provider-accounts bootstrap pacct_01k… --pool pool_01k… --wait 600',
    'better-compute provider-accounts bootstrap pacct_01k… --pool pool_01k… --hosts root@10.0.0.5:22',
  ],
  async run(context) {
    const { args, flags, api } = context;
    const client = await api();
    const hosts = flags.hosts.length > 0 ? flags.hosts : undefined;
    const started = (await withIdempotencyKey(context, flags.key, (idempotencyKey) =>
      client.call(
        'providerAccounts.bootstrap',
        defined({ accountId: args.account, poolId: flags.pool, hosts, idempotencyKey }),
      ),
    )) as Bootstrap;
    const done = (hosts: Bootstrap['hosts']) =>
      hosts.filter((host) => host.state !== 'pending' && host.state !== 'running').length;
    return waitFor(context, started, flags.wait, {
      noun: 'bootstrap',
      show: `better-compute provider-accounts get ${args.account} --query bootstraps`,
      read: async () => {
        const account = (await client.call('providerAccounts.get', { accountId: args.account })) as {
          bootstraps: Bootstrap[];
        };
        return account.bootstraps.find((entry) => entry.id === started.id) ?? started;
      },
      busy: (current) => current.state === 'running',
      describe: (current) =>
        `${current.state}, ${done(current.hosts)} of ${current.hosts.length} host(s) done`,
      failure: (current) =>
        current.state === 'failed'
          ? `failed: ${current.hosts
              .filter((host) => host.state === 'failed')
              .map((host) => `${host.host}: ${host.error}`)
              .join('; ')}`
          : null,
      hint: `"better-compute provider-accounts get ${args.account} --query bootstraps" shows each host; fix the cause and run the bootstrap again (hosts already nodes are left as they are).`,
    });
  },
});
