/** `commands get CMD`: commands.get, with its exit code and bounded output. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'commands get',
  group: 'Nodes',
  summary: 'Show a command with its state, exit code and output (commands.get)',
  target: 'token',
  calls: ['commands.get'],
  positionals: [{ name: 'command', description: 'The command id', required: true, kind: 'command' }],
  examples: ['better-compute commands get cmd_01k…', 'better-compute commands get cmd_01k… --query stdout'],
  async run({ args, api }) {
    return (await api()).call('commands.get', { commandId: args.command });
  },
});
