/** `drivers list`: the machine drivers this build supports. */
import { defineCommand } from '../../../define.js';
import { listResult } from '../../shared.js';

export default defineCommand({
  name: 'drivers list',
  group: 'Capacity',
  summary: 'List the machine drivers this deployment supports (drivers.list)',
  target: 'token',
  calls: ['drivers.list'],
  defaultFormat: 'table',
  examples: ['better-compute drivers list'],
  async run({ api, global }) {
    const page = await (await api()).call('drivers.list', {});
    return listResult({ global }, page, (d) => ({
      name: d.name,
      classes: d.classes.join(','),
      joins: d.joins,
      simulated: d.simulated ? 'yes' : 'no',
      summary: d.summary,
    }));
  },
});
