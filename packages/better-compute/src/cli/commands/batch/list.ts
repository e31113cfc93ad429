/** `batch list [--state STATE]`: commandBatches.list, newest first: reason, state, size, approvals had and needed. */
import { defineCommand } from '../../define.js';
import { defined, listResult, pageFlags, pageOf } from '../shared.js';

const BATCH_STATES = ['pending', 'approved', 'expired', 'cancelled'] as const;

export default defineCommand({
  name: 'batch list',
  group: 'Batches',
  summary:
    'The tenant’s batches, newest first: reason, state, size, approvals had and needed (commandBatches.list)',
  target: 'token',
  calls: ['commandBatches.list'],
  flags: {
    state: {
      type: 'string',
      choices: BATCH_STATES,
      description: 'Only the batches in this state',
      placeholder: 'STATE',
    },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: [
    'better-compute batch list --tenant acme --state pending',
    'better-compute batch list --format json',
  ],
  async run(context) {
    const { flags } = context;
    const page = await (
      await context.api()
    ).call('commandBatches.list', defined({ state: flags.state, ...pageOf(flags) }));
    return listResult(context, page, (batch) => ({
      id: batch.id,
      state: batch.state,
      size: batch.size,
      approvals: `${batch.approvals.length} of ${batch.approvalsNeeded}`,
      closes: batch.notAfter,
      proposed: batch.createdByAgent ? `agent ${batch.createdByAgent}` : batch.createdBy,
      reason: batch.reason,
    }));
  },
});
