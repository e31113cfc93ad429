/** `flavors list --pool POOL`: flavors.list, a table by default. */
import { defineCommand } from '../../define.js';
import { listResult, pageFlags, pageOf } from '../shared.js';
import { flavorColumns } from './shared.js';

export default defineCommand({
  name: 'flavors list',
  group: 'VPS',
  summary: 'List a VPS pool’s flavors (flavors.list)',
  target: 'token',
  calls: ['flavors.list'],
  flags: {
    pool: { type: 'id', kind: 'pool', required: true, description: 'The VPS pool' },
    name: { type: 'string', description: 'Only the flavor of this name' },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: [
    'better-compute flavors list --pool pool_01k…',
    'FLAVOR=$(better-compute flavors list --pool pool_01k… --name small --query items[0].id)',
  ],
  async run({ flags, api, global }) {
    const page = await (
      await api()
    ).call('flavors.list', {
      poolId: flags.pool,
      ...(flags.name ? { name: flags.name } : {}),
      ...pageOf(flags),
    });
    return listResult({ global }, page, flavorColumns);
  },
});
