/** `commands list --node NODE [--state]`: commands.list, a node's commands oldest first. */
import { defineCommand } from '../../define.js';
import { defined, listResult, pageFlags, pageOf } from '../shared.js';

export const COMMAND_STATES = ['queued', 'sent', 'running', 'succeeded', 'failed', 'cancelled'] as const;

export default defineCommand({
  name: 'commands list',
  group: 'Nodes',
  summary: 'A node’s commands, oldest first (commands.list)',
  target: 'token',
  calls: ['commands.list'],
  flags: {
    node: { type: 'id', kind: 'node', required: true, description: 'The node whose commands to list' },
    state: { type: 'string', choices: COMMAND_STATES, description: 'Only the commands in this state' },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: [
    'better-compute commands list --node node_01k…',
    'better-compute commands list --node node_01k… --state failed',
  ],
  async run(context) {
    const { flags } = context;
    const page = await (
      await context.api()
    ).call('commands.list', defined({ nodeId: flags.node, state: flags.state, ...pageOf(flags) }));
    return listResult(context, page, (command) => ({
      id: command.id,
      kind: command.kind,
      state: command.state,
      exit: command.exitCode ?? '-',
      workflow: command.workflowId ?? '-',
      created: command.createdAt,
      finished: command.finishedAt ?? '-',
    }));
  },
});
