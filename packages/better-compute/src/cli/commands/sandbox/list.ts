/** `sandbox list [--all] [--deleted] [--template T]`: sandboxes.list, a table by default. */
import { defineCommand } from '../../define.js';
import { defined, listResult, pageFlags, pageOf } from '../shared.js';
import { sandboxColumns } from './shared.js';

export default defineCommand({
  name: 'sandbox list',
  group: 'Sandboxes',
  summary: 'List your sandboxes, or the tenant’s with --all, newest first (sandboxes.list)',
  target: 'token',
  calls: ['sandboxes.list'],
  flags: {
    all: { type: 'boolean', description: 'Every sandbox of the tenant, not only yours' },
    deleted: { type: 'boolean', description: 'Deleted sandboxes too' },
    template: { type: 'id', kind: 'sandboxTemplate', description: 'Only sandboxes of this template' },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: ['better-compute sandbox list --all --template sbxt_01k5w…'],
  async run({ flags, api, global }) {
    const page = await (
      await api()
    ).call('sandboxes.list', {
      ...pageOf(flags),
      all: flags.all,
      deleted: flags.deleted,
      ...defined({ templateId: flags.template }),
    });
    return listResult({ global }, page, sandboxColumns);
  },
});
