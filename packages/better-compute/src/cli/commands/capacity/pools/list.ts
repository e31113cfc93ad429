/** `pools list [--class C] [--name NAME]`: the tenant's own pools and the pools offered to it. */
import { defineCommand } from '../../../define.js';
import { listResult, pageFlags, pageOf } from '../../shared.js';

export default defineCommand({
  name: 'pools list',
  group: 'Capacity',
  summary: 'List your pools and the pools offered to you (pools.list)',
  target: 'token',
  calls: ['pools.list'],
  flags: {
    class: { type: 'string', choices: ['gpu', 'vps', 'metal'], description: 'Only pools of this class' },
    name: { type: 'string', description: 'Only the pool of this name (with --query items[0].id, its id)' },
    archived: { type: 'boolean', description: 'Include archived pools' },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: [
    'better-compute pools list',
    'better-compute pools list --class gpu --query items[].id',
    'POOL=$(better-compute pools list --name sim-gpu --query items[0].id)',
  ],
  async run({ flags, api, global }) {
    const page = await (
      await api()
    ).call('pools.list', {
      ...(flags.class ? { class: flags.class } : {}),
      ...(flags.name ? { name: flags.name } : {}),
      ...(flags.archived ? { includeArchived: true } : {}),
      ...pageOf(flags),
    });
    return listResult({ global }, page, (p) => ({
      id: p.id,
      name: p.name,
      class: p.class,
      site: p.siteId,
      driver: p.driver,
      state: p.state,
      owner: p.tenantId,
      access: p.access,
    }));
  },
});
