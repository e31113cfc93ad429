/** `instances list [--state S] [--pool POOL]`: instances.list, a table by default. */
import { defineCommand } from '../../define.js';
import { defined, listResult, pageFlags, pageOf } from '../shared.js';
import { instanceColumns } from './shared.js';

export default defineCommand({
  name: 'instances list',
  group: 'VPS',
  summary: 'List your tenant’s instances, newest first (instances.list)',
  target: 'token',
  calls: ['instances.list'],
  flags: {
    state: {
      type: 'string',
      choices: ['provisioning', 'running', 'stopping', 'stopped', 'deleting', 'deleted', 'failed'],
      description: 'Only instances in this state (deleted ones are listed only so)',
    },
    pool: { type: 'id', kind: 'pool', description: 'Only instances of this pool' },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: ['better-compute instances list', 'better-compute instances list --state failed --format json'],
  async run({ flags, api, global }) {
    const page = await (
      await api()
    ).call('instances.list', {
      ...pageOf(flags),
      ...defined({ state: flags.state, poolId: flags.pool }),
    });
    return listResult({ global }, page, instanceColumns);
  },
});
