/** `metal list [--site SITE] [--state STATE]`: metal.list, a table by default. */
import { defineCommand } from '../../define.js';
import { defined, listResult, pageFlags, pageOf } from '../shared.js';
import { machineColumns } from './shared.js';

export default defineCommand({
  name: 'metal list',
  group: 'Nodes',
  summary: 'List your bare-metal machines with their provision and power states (metal.list)',
  target: 'token',
  calls: ['metal.list'],
  flags: {
    site: { type: 'id', kind: 'site', description: 'Only this site’s machines' },
    state: { type: 'string', description: 'Only machines in this provision state', placeholder: 'STATE' },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: ['better-compute metal list', 'better-compute metal list --state available --query items[].id'],
  async run({ flags, api, global }) {
    const page = await (
      await api()
    ).call(
      'metal.list',
      defined({ siteId: flags.site, provisionState: flags.state as never, ...pageOf(flags) }),
    );
    return listResult({ global }, page, machineColumns);
  },
});
