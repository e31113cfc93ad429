/** `help`, `help COMMAND`, `help --json`: rendered from the manifest, project commands included. */
import { defineCommand } from '../../define.js';
import { renderCommand, renderOverview, renderPrefix } from '../../help.js';
import { CliError } from '../../errors.js';
import { looksLikeSecret } from '../../shown.js';
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
    // `help migrate extra`: "migrate" is a command; the words after it are refused, never "did you mean migrate".
    // A whole name first: `help release keygen` is that command, though `release` is one too.
    const whole = manifest.commands.some((c) => c.name === name);
    for (let n = whole ? 0 : args.command.length - 1; n > 0; n--) {
      const prefix = args.command.slice(0, n).join(' ');
      if (!manifest.commands.some((c) => c.name === prefix)) continue;
      const extra = args.command.slice(n);
      const shown = extra.some((word) => looksLikeSecret(word))
        ? `the ${extra.length === 1 ? 'word' : 'words'} after it ${extra.length === 1 ? 'is' : 'are'} not part of it`
        : `"${extra.join(' ')}" is not part of it`;
      throw new CliError('INVALID_COMMAND', `"help ${prefix}" takes one command; ${shown}`, {
        hint: `Run "better-compute help ${prefix}".`,
        details: { command: name, suggestion: prefix },
      });
    }
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
