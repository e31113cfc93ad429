/** `sandbox templates [--pool POOL]`: sandboxTemplates.list with their warm pools, a table by default. */
import { defineCommand } from '../../define.js';
import { defined, listResult, pageFlags, pageOf } from '../shared.js';
import { templateColumns } from './shared.js';

export default defineCommand({
  name: 'sandbox templates',
  group: 'Sandboxes',
  summary: 'List the sandbox templates with their warm pools (sandboxTemplates.list)',
  target: 'token',
  calls: ['sandboxTemplates.list'],
  flags: {
    pool: { type: 'id', kind: 'pool', description: 'Only templates of this pool' },
    name: { type: 'string', description: 'Only the template of this name' },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: [
    'better-compute sandbox templates --format table',
    'TEMPLATE=$(better-compute sandbox templates --name shell --query items[0].id)',
  ],
  async run({ flags, api, global }) {
    const page = await (
      await api()
    ).call('sandboxTemplates.list', {
      ...pageOf(flags),
      ...defined({ poolId: flags.pool, name: flags.name }),
    });
    return listResult({ global }, page, templateColumns);
  },
});
