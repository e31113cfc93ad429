/** `confirmations decline CFM`: confirmations.decline; the agent's call never runs. */
import { defineCommand } from '../../define.js';
import { reviewLines } from './review.js';

export default defineCommand({
  name: 'confirmations decline',
  group: 'Batches',
  summary: 'Decline what an agent asked to run: it never runs (confirmations.decline)',
  target: 'token',
  calls: ['confirmations.get', 'confirmations.decline'],
  positionals: [
    { name: 'confirmation', description: 'The confirmation, cfm_…', required: true, kind: 'confirmation' },
  ],
  examples: ['better-compute confirmations decline cfm_01k5w…'],
  async run({ args, log, api }) {
    const client = await api();
    const confirmation = await client.call('confirmations.get', { confirmationId: args.confirmation });
    for (const line of reviewLines(confirmation)) log(line);
    const declined = await client.call('confirmations.decline', { confirmationId: confirmation.id });
    log(`Declined: ${declined.id} never runs.`);
    return declined;
  },
});
