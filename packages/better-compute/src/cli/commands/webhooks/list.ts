/** `webhooks list [--limit N] [--cursor C]`: webhooks.list, a table by default. */
import { defineCommand } from '../../define.js';
import { listResult, pageFlags, pageOf } from '../shared.js';
import { webhookColumns } from './shared.js';

export default defineCommand({
  name: 'webhooks list',
  group: 'Events',
  summary: 'List your tenant’s webhooks (webhooks.list)',
  target: 'token',
  calls: ['webhooks.list'],
  flags: { ...pageFlags },
  defaultFormat: 'table',
  examples: ['better-compute webhooks list', 'better-compute webhooks list --format json'],
  async run({ flags, api, global }) {
    const page = await (await api()).call('webhooks.list', pageOf(flags));
    return listResult({ global }, page, webhookColumns);
  },
});
