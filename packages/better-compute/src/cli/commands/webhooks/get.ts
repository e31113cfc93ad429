/** `webhooks get WEBHOOK`: webhooks.get (never the secret). */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'webhooks get',
  group: 'Events',
  summary: 'Show a webhook; its secret is never shown again (webhooks.get)',
  target: 'token',
  calls: ['webhooks.get'],
  positionals: [{ name: 'webhook', description: 'The webhook id', required: true, kind: 'webhook' }],
  examples: ['better-compute webhooks get wh_01k…'],
  async run({ args, api }) {
    return (await api()).call('webhooks.get', { webhookId: args.webhook });
  },
});
