/** `confirmations get CFM`: confirmations.get, with exactly what would run. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'confirmations get',
  group: 'Batches',
  summary:
    'One confirmation: exactly what the agent’s call would run, its state and window (confirmations.get)',
  target: 'token',
  calls: ['confirmations.get'],
  positionals: [
    { name: 'confirmation', description: 'The confirmation, cfm_…', required: true, kind: 'confirmation' },
  ],
  examples: ['better-compute confirmations get cfm_01k5w…'],
  async run({ args, api }) {
    return (await api()).call('confirmations.get', { confirmationId: args.confirmation });
  },
});
