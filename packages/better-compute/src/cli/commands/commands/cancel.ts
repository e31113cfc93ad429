/** `commands cancel CMD`: commands.cancel; a running command is told to stop. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'commands cancel',
  group: 'Nodes',
  summary: 'Cancel a command; a running one is told to stop (commands.cancel)',
  target: 'token',
  calls: ['commands.cancel'],
  positionals: [{ name: 'command', description: 'The command id', required: true, kind: 'command' }],
  examples: ['better-compute commands cancel cmd_01k…'],
  async run({ args, api }) {
    return (await api()).call('commands.cancel', { commandId: args.command });
  },
});
