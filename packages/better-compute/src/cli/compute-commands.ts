/**
 * `computeCommands(define, options?)`: every built-in command as a spec of another CLI framework's
 * defineCommand (Better IAM's, say), so one binary can carry both. Each spec declares compute's own
 * flags plus --config and --url; running it turns the flags back into a command line and runs
 * compute's program, which reads its own BETTER_COMPUTE_* environment and prints its own output,
 * failures included.
 */
import type { FlagSpec, FlagSpecs, PositionalSpec } from './define.js';
import { kebabCase } from './define.js';
import { CONFIG_FLAGS, TOKEN_FLAGS } from './global-flags.js';
import { builtinCommands } from './commands/index.js';
import { exitStatusOf, markReported, printFailure } from './errors.js';
import type { CliIO } from './io.js';
import { processIO } from './io.js';
import type { ComputeCli } from './program.js';
import { createCli } from './program.js';

export interface ComputeCommandsOptions {
  /** Prefix of every name; default `compute-`. */
  prefix?: string;
  /** What joins the words of a multi-word command; default `-` (`compute-auth-login`), or ' '. */
  separator?: string;
  /** Built-in commands to leave out, by name (`dev`, `serve`, `auth login`). */
  exclude?: readonly string[];
  /** The program that runs them; default a new `createCli()`. */
  cli?: ComputeCli;
}

/** What a host framework passes to a spec's `run`; every field is optional. */
export interface HostRunContext {
  flags?: Record<string, unknown>;
  args?: Record<string, unknown> | readonly unknown[];
  rest?: readonly string[];
  global?: { format?: unknown; query?: unknown };
  io?: CliIO;
}

export interface HostCommandSpec {
  name: string;
  group: 'Compute';
  summary: string;
  description?: string;
  target: 'none';
  flags: FlagSpecs;
  positionals: readonly PositionalSpec[];
  examples: readonly string[];
  run(context: HostRunContext): Promise<undefined>;
}

function argvOfFlags(flags: FlagSpecs, given: Record<string, unknown>): string[] {
  const argv: string[] = [];
  for (const [key, spec] of Object.entries(flags) as [string, FlagSpec][]) {
    const flag = kebabCase(key);
    const value = given[key] ?? given[flag];
    if (value === undefined || value === null) continue;
    if (spec.type === 'boolean') {
      if (value === true && spec.default !== true) argv.push(`--${flag}`);
      if (value === false && spec.default === true) argv.push(`--no-${flag}`);
      continue;
    }
    for (const item of Array.isArray(value) ? value : [value]) argv.push(`--${flag}`, String(item));
  }
  return argv;
}

function argvOfPositionals(positionals: readonly PositionalSpec[], args: HostRunContext['args']): string[] {
  if (Array.isArray(args)) return args.map(String);
  const record = (args ?? {}) as Record<string, unknown>;
  return positionals.flatMap((p) => {
    const value = record[p.name];
    if (value === undefined || value === null) return [];
    return Array.isArray(value) ? value.map(String) : [String(value)];
  });
}

function isCliIO(value: unknown): value is CliIO {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as CliIO).out === 'function' &&
    typeof (value as CliIO).env === 'object'
  );
}

/**
 * Compute's commands as specs for another framework.
 *
 * @example
 * const cli = createCli({ commands: computeCommands(defineCommand, { exclude: ['dev', 'serve'] }) });
 */
export function computeCommands<T>(
  define: (spec: HostCommandSpec) => T,
  options: ComputeCommandsOptions = {},
): T[] {
  const prefix = options.prefix ?? 'compute-';
  const separator = options.separator ?? '-';
  const exclude = new Set(options.exclude ?? []);
  let cli = options.cli;
  return builtinCommands
    .filter((command) => !exclude.has(command.name))
    .map((command) => {
      const words = command.name.split(' ');
      const extra: FlagSpecs =
        command.target === 'none' ? {} : { config: CONFIG_FLAGS.config, url: TOKEN_FLAGS.url };
      const flags: FlagSpecs = { ...(command.flags ?? {}), ...extra };
      const positionals = command.positionals ?? [];
      return define({
        name: `${prefix}${words.join(separator)}`,
        group: 'Compute',
        summary: command.summary,
        ...(command.description ? { description: command.description } : {}),
        target: 'none',
        flags,
        positionals,
        examples: (command.examples ?? []).map((example) =>
          example.replace(
            /\bbetter-compute /,
            `better-compute ${prefix}${words.join(separator)} `.replace(
              ` ${prefix}${words.join(separator)} ${command.name} `,
              ' ',
            ),
          ),
        ),
        async run(context) {
          const io = isCliIO(context.io) ? context.io : processIO();
          const output: string[] = [];
          const format = context.global?.format ?? context.flags?.format;
          const query = context.global?.query ?? context.flags?.query;
          if (typeof format === 'string' && command.output !== false) output.push('--format', format);
          if (typeof query === 'string' && command.output !== false) output.push('--query', query);
          const argv = [
            ...words,
            ...argvOfPositionals(positionals, context.args),
            ...argvOfFlags(flags, context.flags ?? {}),
            ...output,
            ...(context.rest?.length ? ['--', ...context.rest] : []),
          ];
          cli ??= createCli();
          try {
            await cli.run(argv, io);
          } catch (error) {
            // Compute prints its own failure; the host sees it already reported, with its exit status.
            printFailure(error, io);
            throw markReported(error, exitStatusOf(error));
          }
          return undefined;
        },
      });
    });
}
