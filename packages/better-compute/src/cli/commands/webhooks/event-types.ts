/** `webhooks event-types`: webhooks.eventTypes, the catalog a webhook subscribes to. */
import { defineCommand } from '../../define.js';
import { printsTable } from '../shared.js';

export default defineCommand({
  name: 'webhooks event-types',
  group: 'Events',
  summary: 'The event types a webhook can subscribe to (webhooks.eventTypes)',
  target: 'token',
  calls: ['webhooks.eventTypes'],
  defaultFormat: 'table',
  examples: [
    'better-compute webhooks event-types',
    "better-compute webhooks event-types --query 'items[].type'",
  ],
  async run({ api, global }) {
    const answer = await (await api()).call('webhooks.eventTypes', {});
    return printsTable({ global }) ? { items: answer.items, nextCursor: null } : answer;
  },
});
