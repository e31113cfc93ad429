/** `webhooks delete WEBHOOK [--if-version N]`: webhooks.delete, with its deliveries. */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';

export default defineCommand({
  name: 'webhooks delete',
  group: 'Events',
  summary: 'Delete a webhook and its deliveries (webhooks.delete)',
  target: 'token',
  calls: ['webhooks.delete'],
  positionals: [{ name: 'webhook', description: 'The webhook id', required: true, kind: 'webhook' }],
  flags: { ifVersion: ifVersionFlag },
  examples: ['better-compute webhooks delete wh_01k…'],
  async run({ args, flags, api }) {
    return (await api()).call(
      'webhooks.delete',
      defined({ webhookId: args.webhook, ifVersion: flags.ifVersion }),
    );
  },
});
