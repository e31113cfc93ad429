/** `sites list`: sites.list, as a table by default. */
import { defineCommand } from '../../../define.js';
import { listResult, pageFlags, pageOf } from '../../shared.js';

export default defineCommand({
  name: 'sites list',
  group: 'Fleet',
  summary: 'List the tenant’s sites (sites.list)',
  target: 'token',
  calls: ['sites.list'],
  flags: { ...pageFlags },
  defaultFormat: 'table',
  examples: ['better-compute sites list'],
  async run(context) {
    const page = await (await context.api()).call('sites.list', pageOf(context.flags));
    return listResult(context, page, (site) => ({
      id: site.id,
      name: site.name,
      region: site.region ?? '-',
      labels: Object.entries(site.labels)
        .map(([key, value]) => `${key}=${value}`)
        .join(','),
      version: site.version,
      createdAt: site.createdAt,
    }));
  },
});
