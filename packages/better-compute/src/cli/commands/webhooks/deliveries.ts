/** `webhooks deliveries WEBHOOK [--state S] [--limit N] [--cursor C]`: webhooks.deliveries, newest first. */
import { defineCommand } from '../../define.js';
import { defined, listResult, pageFlags, pageOf } from '../shared.js';
import { deliveryColumns } from './shared.js';

export default defineCommand({
  name: 'webhooks deliveries',
  group: 'Events',
  summary: 'A webhook’s deliveries and their attempts, newest first (webhooks.deliveries)',
  target: 'token',
  calls: ['webhooks.deliveries'],
  positionals: [{ name: 'webhook', description: 'The webhook id', required: true, kind: 'webhook' }],
  flags: {
    state: {
      type: 'string',
      choices: ['pending', 'succeeded', 'failed'],
      description: 'Only deliveries in this state',
    },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: [
    'better-compute webhooks deliveries wh_01k…',
    'better-compute webhooks deliveries wh_01k… --state failed --format json',
  ],
  async run({ args, flags, api, global }) {
    const page = await (
      await api()
    ).call('webhooks.deliveries', {
      webhookId: args.webhook,
      ...defined({ state: flags.state }),
      ...pageOf(flags),
    });
    return listResult({ global }, page, deliveryColumns);
  },
});
