/**
 * `confirmations approve CFM [--yes]`: shows exactly what the agent's call would run, then, with
 * --yes, approves it (confirmations.approve): the agent's retry with the same input and idempotency
 * key then runs once within 15 minutes. Without --yes it stops after the summary, exit status 1, as
 * `batch approve` does. The server takes it only from a session opened with your second factor.
 */
import { CliError, markReported } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { reviewLines } from './review.js';

export default defineCommand({
  name: 'confirmations approve',
  group: 'Batches',
  summary: 'Show what your agent asked to run, then approve it with --yes (confirmations.approve)',
  description:
    'Without --yes it prints the summary and stops. Approving needs a session signed in with your second factor (better-iam login --totp-stdin).',
  target: 'token',
  calls: ['confirmations.get', 'confirmations.approve'],
  positionals: [
    { name: 'confirmation', description: 'The confirmation, cfm_…', required: true, kind: 'confirmation' },
  ],
  flags: {
    yes: { type: 'boolean', description: 'Approve after the summary, without stopping' },
  },
  examples: [
    'better-compute confirmations approve cfm_01k5w…',
    'better-compute confirmations approve cfm_01k5w… --yes',
  ],
  async run({ args, flags, log, api }) {
    const client = await api();
    const confirmation = await client.call('confirmations.get', { confirmationId: args.confirmation });
    for (const line of reviewLines(confirmation)) log(line);
    if (!flags.yes) {
      const stop = `Not approved. Re-run with --yes to approve ${confirmation.id}.`;
      log(stop);
      // The line above is the whole answer; the status still says nothing was approved.
      throw markReported(new CliError('CONFIRMATION_REQUIRED', stop), 1);
    }
    const approved = await client.call('confirmations.approve', { confirmationId: confirmation.id });
    log(`Approved: the agent's retry runs once until ${approved.expiresAt}.`);
    return approved;
  },
});
