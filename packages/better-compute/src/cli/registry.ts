/**
 * The command registry. It refuses what would confuse a person or a shell: a duplicate name, a
 * command in a group help does not know (an orphan), a malformed name or flag, a flag that shadows
 * a shared one, a variadic positional that is not last.
 */
import { ComputeError } from '@better-compute/core';
import { type AnyCommand, HELP_GROUPS, type HelpGroup, kebabCase } from './define.js';
import { globalFlagsOf } from './global-flags.js';

/** Command words: letters, digits and anything but whitespace and controls, never starting with `-`. */
const COMMAND_WORD =
  /^[^\s\-\u0000-\u001f\u007f-\u009f\u2028\u2029][^\s\u0000-\u001f\u007f-\u009f\u2028\u2029]*$/;
const FLAG_KEY = /^[a-z][a-zA-Z0-9]*$/;

export interface RegisteredCommand {
  command: AnyCommand;
  /** The help group it is listed under. */
  group: string;
  /** Whether it came from a configuration's `export const commands`. */
  project: boolean;
}

function refuse(message: string): never {
  throw new ComputeError('INVALID_CONFIG', message, {
    hint: 'Fix the command definition: see "Project commands" in the CLI guide.',
  });
}

export class CommandRegistry {
  readonly #commands = new Map<string, RegisteredCommand>();
  readonly #groups: readonly HelpGroup[];

  constructor(groups: readonly HelpGroup[] = HELP_GROUPS) {
    this.#groups = groups;
  }

  get groups(): readonly HelpGroup[] {
    return this.#groups;
  }

  /** Adds a command; throws INVALID_CONFIG for a duplicate, an orphan or a malformed definition. */
  add(command: AnyCommand, options: { project?: boolean } = {}): void {
    const project = options.project ?? false;
    if (
      typeof command !== 'object' ||
      command === null ||
      typeof command.name !== 'string' ||
      typeof command.run !== 'function'
    ) {
      refuse('a command must be defineCommand({ name, summary, target, run })');
    }
    const words = command.name.split(' ');
    if (!words.every((word) => COMMAND_WORD.test(word)))
      refuse(`"${command.name}" is not a command name of lowercase words`);
    if (this.#commands.has(command.name)) refuse(`two commands are named "${command.name}"`);
    if (!['token', 'config', 'none'].includes(command.target))
      refuse(`command "${command.name}" needs a target: token, config or none`);
    const group = command.group ?? (project ? 'Project' : undefined);
    if (!group || !this.#groups.some((known) => known.name === group)) {
      refuse(`command "${command.name}" names the help group "${String(group)}", which help does not know`);
    }
    const shared = globalFlagsOf(command);
    const names = new Set<string>();
    const booleans = new Set<string>();
    for (const [key, spec] of Object.entries(command.flags ?? {})) {
      if (spec.type === 'boolean') booleans.add(kebabCase(key));
      if (!FLAG_KEY.test(key)) refuse(`command "${command.name}" has a malformed flag "${key}"`);
      if (Object.hasOwn(shared, key) || key === 'help')
        refuse(`command "${command.name}" redefines the shared flag --${kebabCase(key)}`);
      if (spec.type === 'boolean' && (spec as { repeated?: unknown }).repeated)
        refuse(`--${kebabCase(key)} cannot be both boolean and repeated`);
      names.add(kebabCase(key));
    }
    // --no-X negates a boolean --X, so both may not be defined; beside a valued --X (a file, say)
    // a boolean --no-X is unambiguous: `--user-data FILE` and `--no-user-data`.
    for (const name of names)
      if (name.startsWith('no-') && booleans.has(name.slice(3)))
        refuse(`command "${command.name}" has both --${name.slice(3)} and --${name}`);
    const positionals = command.positionals ?? [];
    positionals.forEach((positional, i) => {
      if (positional.variadic && i !== positionals.length - 1)
        refuse(`command "${command.name}": only the last positional may be variadic`);
    });
    this.#commands.set(command.name, { command, group, project });
  }

  get(name: string): RegisteredCommand | undefined {
    return this.#commands.get(name);
  }

  /** Every command, in the order added. */
  list(): RegisteredCommand[] {
    return [...this.#commands.values()];
  }

  names(): string[] {
    return [...this.#commands.keys()];
  }

  /** The longest command whose words begin `words`, and how many words it took. */
  match(words: readonly string[]): { entry: RegisteredCommand; length: number } | undefined {
    for (let length = words.length; length > 0; length--) {
      const entry = this.#commands.get(words.slice(0, length).join(' '));
      if (entry) return { entry, length };
    }
    return undefined;
  }

  /** Whether some command's name begins with these words (`auth` for `auth login`). */
  isPrefix(words: readonly string[]): boolean {
    const prefix = `${words.join(' ')} `;
    return this.names().some((name) => name.startsWith(prefix));
  }
}
