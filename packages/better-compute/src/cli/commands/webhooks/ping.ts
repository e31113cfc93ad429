/** `webhooks ping WEBHOOK`: webhooks.ping, a webhook.ping test delivery sent now. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'webhooks ping',
  group: 'Events',
  summary:
    'Send a test delivery (its type is the ping event) now; see it with webhooks deliveries (webhooks.ping)',
  target: 'token',
  calls: ['webhooks.ping'],
  positionals: [{ name: 'webhook', description: 'The webhook id', required: true, kind: 'webhook' }],
  examples: ['better-compute webhooks ping wh_01k…'],
  async run({ args, api }) {
    return (await api()).call('webhooks.ping', { webhookId: args.webhook });
  },
});
