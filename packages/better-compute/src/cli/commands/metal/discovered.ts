/** `metal discovered --site SITE`: metal.discovered, a site's PXE discovery of the last 24 hours, a table by default. */
import type { z } from 'zod';
import type { pxeDiscoverySchema } from '@better-compute/core/methods';
import { defineCommand } from '../../define.js';
import { printsTable } from '../shared.js';

type Discovery = z.output<typeof pxeDiscoverySchema>;

function discoveryColumns(row: Discovery): Record<string, unknown> {
  return {
    kind: row.kind,
    mac: row.mac,
    uuid: row.uuid ?? '',
    machine: row.machineId ? `${row.machineId} (${row.machineName})` : '',
    seen: row.timesSeen,
    last: row.lastSeenAt,
  };
}

export default defineCommand({
  name: 'metal discovered',
  group: 'Nodes',
  summary:
    'List what a site’s agents saw PXE-booting from MACs with no boot entry in the last 24 hours, candidates first (metal.discovered)',
  target: 'token',
  calls: ['metal.discovered'],
  flags: {
    site: { type: 'id', kind: 'site', required: true, description: 'The site whose discovery to list' },
  },
  defaultFormat: 'table',
  examples: [
    'better-compute metal discovered --site site_01k…',
    'better-compute metal discovered --site site_01k… --format json --query items[].mac',
  ],
  async run({ flags, api, global }) {
    const answer = await (await api()).call('metal.discovered', { siteId: flags.site });
    // A table shows the rows; JSON keeps the whole answer. Discovery is never paged (at most 1024 a site).
    if (!printsTable({ global })) return answer;
    return { items: answer.items.map(discoveryColumns), nextCursor: null };
  },
});
