/** `profiles list [--pool POOL]`: profiles.list, a table by default. */
import { defineCommand } from '../../define.js';
import { defined, listResult, pageFlags, pageOf } from '../shared.js';
import { profileColumns } from './shared.js';

export default defineCommand({
  name: 'profiles list',
  group: 'Nodes',
  summary: 'List your tenant’s provision profiles: names, versions, pools and images (profiles.list)',
  target: 'token',
  calls: ['profiles.list'],
  flags: {
    pool: {
      type: 'string',
      description: 'Only profiles whose machines join this pool',
      placeholder: 'POOL',
      kind: 'pool',
    },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: [
    'better-compute profiles list',
    'better-compute profiles list --pool pool_01k… --query items[].name',
  ],
  async run({ flags, api, global }) {
    const page = await (await api()).call('profiles.list', defined({ poolId: flags.pool, ...pageOf(flags) }));
    return listResult({ global }, page, profileColumns);
  },
});
