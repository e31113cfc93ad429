/** `help`, `help COMMAND`, `help --json`: rendered from the manifest, project commands included. */
import { defineCommand } from '../../define.js';
import { renderCommand, renderOverview, renderPrefix } from '../../help.js';
import { unknownCommandError } from '../../suggest.js';

export default defineCommand({
  name: 'help',
  group: 'Start',
  summary: 'Show the commands, or one command’s flags, defaults and examples',
  target: 'none',
  output: false,
  flags: {
    json: { type: 'boolean', description: 'Print the whole manifest (every command and flag) as JSON' },
  },
  positionals: [{ name: 'command', description: 'A command, such as api or auth login', variadic: true }],
  examples: ['better-compute help', 'better-compute help auth login', 'better-compute help --json'],
  async run({ flags, args, program }) {
    const manifest = await program.manifest();
    const name = args.command.join(' ');
    if (flags.json) {
      if (!name) return manifest;
      const command = manifest.commands.find((c) => c.name === name);
      if (!command)
        throw unknownCommandError(
          args.command,
          manifest.commands.map((c) => c.name),
        );
      return command;
    }
    if (!name) return renderOverview(manifest);
    const command = manifest.commands.find((c) => c.name === name);
    if (command) return renderCommand(manifest, command);
    if (manifest.commands.some((c) => c.name.startsWith(`${name} `))) return renderPrefix(manifest, name);
    throw unknownCommandError(
      args.command,
      manifest.commands.map((c) => c.name),
    );
  },
});
