/** `webhooks redeliver WEBHOOK DELIVERY`: webhooks.redeliver, one delivery again with its id and body. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'webhooks redeliver',
  group: 'Events',
  summary: 'Send one delivery again, now, with its original id and body (webhooks.redeliver)',
  target: 'token',
  calls: ['webhooks.redeliver'],
  positionals: [
    { name: 'webhook', description: 'The webhook id', required: true, kind: 'webhook' },
    { name: 'delivery', description: 'The delivery id (msg_…)', required: true, kind: 'webhookDelivery' },
  ],
  examples: ['better-compute webhooks redeliver wh_01k… msg_01k…'],
  async run({ args, api }) {
    return (await api()).call('webhooks.redeliver', { webhookId: args.webhook, deliveryId: args.delivery });
  },
});
