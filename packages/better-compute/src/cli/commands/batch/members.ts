/** `batch members --batch ID [--state S]`: commandBatches.members, the batch's commands in leaf order, awaitingApproval while held. */
import { defineCommand } from '../../define.js';
import { COMMAND_STATES } from '../commands/list.js';
import { defined, listResult, pageFlags, pageOf } from '../shared.js';

export default defineCommand({
  name: 'batch members',
  group: 'Batches',
  summary:
    'A batch’s commands in leaf order, held (awaiting approval) until it is approved (commandBatches.members)',
  target: 'token',
  calls: ['commandBatches.members'],
  flags: {
    batch: {
      type: 'id',
      kind: 'batch',
      required: true,
      description: 'The batch whose commands to list',
      placeholder: 'ID',
    },
    state: {
      type: 'string',
      choices: COMMAND_STATES,
      description: 'Only the commands in this state',
      placeholder: 'S',
    },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: [
    'better-compute batch members --tenant acme --batch batch_01k5w…',
    'better-compute batch members --batch batch_01k5w… --state failed',
  ],
  async run(context) {
    const { flags } = context;
    const page = await (
      await context.api()
    ).call('commandBatches.members', defined({ batchId: flags.batch, state: flags.state, ...pageOf(flags) }));
    return listResult(context, page, (member) => ({
      index: member.index,
      command: member.commandId,
      node: member.nodeId,
      kind: member.kind,
      state: member.awaitingApproval ? `${member.state} (awaiting approval)` : member.state,
      finished: member.finishedAt ?? '-',
      error: member.error ?? '-',
    }));
  },
});
