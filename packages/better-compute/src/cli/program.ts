/**
 * Running a command line: find the command (the configuration's project commands included), parse
 * its flags, build its context, run it, print its result. `runCli` rejects with the failure;
 * `main` prints it and resolves with the exit status, as the binary does.
 */
import { ID_PREFIXES, idKindPhrase, isId, isTenantId } from '@better-compute/core';
import type { ComputeInstance } from '../types.js';
import type { LoadConfigOptions } from '../config/load-config.js';
import { builtinCommands } from './commands/index.js';
import {
  type AnyCommand,
  type CommandContext,
  type GlobalOptions,
  HELP_GROUPS,
  type HelpGroup,
  type OutputFormat,
  type ProgramView,
  type ResolvedIO,
} from './define.js';
import { environmentWithFiles } from './env-files.js';
import { CliError, exitStatusOf, noteCommand, printFailure } from './errors.js';
import { globalFlagsOf } from './global-flags.js';
import { renderCommand, renderPrefix } from './help.js';
import { type CliIO, processIO } from './io.js';
import { buildManifest, type Manifest, manifestCommand } from './manifest.js';
import { formatResult } from './output.js';
import { parseLine } from './parse.js';
import { CommandRegistry } from './registry.js';
import { didYouMean, unknownCommandError } from './suggest.js';
import { looksLikeSecret } from './shown.js';
import { assertProfileName } from './credentials.js';
import { safeCell, safeText } from '@better-compute/core';
import type { CliApi } from './transport-types.js';

export interface CliOptions {
  /** Commands added to the built-in ones, listed under their group (default `Project`). */
  commands?: readonly AnyCommand[];
  /** The help groups; a command naming another is refused. */
  groups?: readonly HelpGroup[];
  /** Whether the built-in commands are included; default true. */
  builtins?: boolean;
  /** Builds the deployment of config commands and the in-process transport; default `loadCompute`. */
  loadCompute?: (options: LoadConfigOptions) => Promise<ComputeInstance>;
  /** Finds the configuration's project commands; false to skip them. Default: its `export const commands`. */
  projectCommands?: false | ((options: LoadConfigOptions) => Promise<unknown[]>);
}

export interface ComputeCli {
  /** Runs one command line; resolves with the command's result, rejects with its failure. */
  run(argv: readonly string[], io?: CliIO): Promise<unknown>;
  /** The manifest of this program's commands (without project commands). */
  manifest(): Manifest;
  readonly registry: CommandRegistry;
}

async function defaultProjectCommands(options: LoadConfigOptions): Promise<unknown[]> {
  const { findConfigFile, loadConfig } = await import('../config/load-config.js');
  // Without a configuration file there is nothing to load, and nothing heavy is imported.
  if (!findConfigFile(options)) return [];
  return (await loadConfig(options)).commands;
}

async function defaultLoadCompute(options: LoadConfigOptions): Promise<ComputeInstance> {
  const { loadCompute } = await import('../config/load-config.js');
  return loadCompute(options);
}

function resolveIO(io: CliIO): ResolvedIO {
  const resolved: ResolvedIO = Object.create(io) as ResolvedIO;
  resolved.err = io.err ? (message) => io.err!(message) : (message) => io.out(message);
  resolved.cwd = io.cwd ?? process.cwd();
  return resolved;
}

/** `--config X` or `--config=X` anywhere before `--`, to find project commands before parsing. */
function configFlagOf(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!;
    if (token === '--') break;
    if (token === '--config') return argv[i + 1];
    if (token.startsWith('--config=')) return token.slice('--config='.length);
  }
  return undefined;
}

/**
 * A program of commands: the built-in ones, yours, and the configuration's.
 *
 * @example
 * const cli = createCli({ commands: [defineCommand({ name: 'hello', summary: 'Say hello', target: 'none', run: () => 'hello' })] });
 * await cli.run(['hello']);
 */
export function createCli(options: CliOptions = {}): ComputeCli {
  const groups = options.groups ?? HELP_GROUPS;
  const base = new CommandRegistry(groups);
  if (options.builtins !== false) for (const command of builtinCommands) base.add(command);
  for (const command of options.commands ?? []) base.add(command, { project: true });
  const loadCompute = options.loadCompute ?? defaultLoadCompute;
  const projectLoader =
    options.projectCommands === false ? undefined : (options.projectCommands ?? defaultProjectCommands);

  async function run(argv: readonly string[], given?: CliIO): Promise<unknown> {
    const io = resolveIO(given ?? processIO());
    // The variables given as NAME_FILE (env-files.ts) are read when a command first reads the
    // environment, so help and version never open a file.
    const rawEnv = io.env;
    let withFiles: Record<string, string | undefined> | undefined;
    Object.defineProperty(io, 'env', {
      get: () => (withFiles ??= environmentWithFiles(rawEnv)),
      enumerable: true,
      configurable: true,
    });
    const registry = new CommandRegistry(groups);
    for (const entry of base.list()) registry.add(entry.command, { project: entry.project });

    const project: { state: 'none' | 'loaded' | 'failed'; error?: unknown } = { state: 'none' };
    const configPath = configFlagOf(argv);
    async function loadProject(): Promise<void> {
      if (project.state !== 'none' || !projectLoader) return;
      try {
        const commands = await projectLoader({ configPath, cwd: io.cwd, env: rawEnv });
        for (const command of commands) registry.add(command as AnyCommand, { project: true });
        project.state = 'loaded';
      } catch (error) {
        project.state = 'failed';
        project.error = error;
      }
    }

    let tokens = [...argv];
    if (tokens.length === 0) tokens = ['help'];
    else if (tokens[0] === '--version' || tokens[0] === '-v') tokens = ['version', ...tokens.slice(1)];
    else if (tokens[0] === '--help' || tokens[0] === '-h') tokens = ['help', ...tokens.slice(1)];
    const firstFlag = tokens.findIndex((token) => token.startsWith('-'));
    const words = firstFlag === -1 ? tokens : tokens.slice(0, firstFlag);

    let match = registry.match(words);
    if (!match) {
      // Only a command that is not built in needs the configuration's commands.
      await loadProject();
      match = registry.match(words);
    }

    const program: ProgramView = {
      name: 'better-compute',
      async commands() {
        await loadProject();
        if (project.state === 'failed') warnProject(io, project.error);
        return registry.list().map((entry) => entry.command);
      },
      async manifest() {
        await loadProject();
        if (project.state === 'failed') warnProject(io, project.error);
        return buildManifest(registry.list(), groups);
      },
    };

    if (!match) {
      if (project.state === 'failed') throw project.error;
      // `better-compute auth` lists the commands under `auth`.
      if (words.length > 0 && registry.isPrefix(words)) {
        const after = tokens.slice(words.length);
        if (after.length === 0 || after.every((token) => token === '--help' || token === '-h')) {
          const text = renderPrefix(buildManifest(registry.list(), groups), words.join(' '));
          io.out(safeText(text));
          return text;
        }
        // `auth --bogus`: the group is right, and it needs one of its commands before any flag.
        const group = words.join(' ');
        const under = registry
          .names()
          .filter((name) => name.startsWith(`${group} `))
          .map((name) => name.slice(group.length + 1).split(' ')[0]!);
        const flag = after[0]!.split('=')[0]!;
        throw new CliError(
          'INVALID_COMMAND',
          `"${group}" is a group of commands, not a command: name one of ${[...new Set(under)].sort().join(', ')} before ${looksLikeSecret(flag) ? 'any flag' : flag}`,
          {
            hint: `Run "better-compute ${group}" for the commands under ${group}.`,
            details: { command: group },
          },
        );
      }
      throw unknownCommandError(words, registry.names());
    }

    const { command } = match.entry;
    refuseMistypedCommandWord(registry, command, tokens[match.length]);
    const shared = globalFlagsOf(command);
    const parsed = parseLine(command, { ...(command.flags ?? {}), ...shared }, tokens.slice(match.length));
    if (parsed.help) {
      // The whole manifest: a command that is also a group (`release`) lists the group's commands too.
      const text = renderCommand(buildManifest(registry.list(), groups), manifestCommand(match.entry));
      io.out(safeText(text));
      return text;
    }

    // An empty --url is a mistake, not "in process" (an empty BETTER_COMPUTE_URL still means unset).
    if (parsed.flags.url === '') {
      throw new CliError('INVALID_ARGUMENT', '--url needs a URL (got an empty value)', {
        hint: 'Pass --url with an origin such as https://compute.example.com, or leave it out to run in process.',
        details: { field: 'url' },
      });
    }
    const token = command.target === 'token';
    const global: GlobalOptions = {
      format: parsed.flags.format as OutputFormat | undefined,
      query: parsed.flags.query as string | undefined,
      url: token
        ? ((parsed.flags.url as string | undefined) ?? (io.env.BETTER_COMPUTE_URL || undefined))
        : undefined,
      tenant: token
        ? ((parsed.flags.tenant as string | undefined) ?? (io.env.BETTER_COMPUTE_TENANT || undefined))
        : undefined,
      config: command.target === 'none' ? undefined : (parsed.flags.config as string | undefined),
      profile: token
        ? ((parsed.flags.profile as string | undefined) ?? (io.env.BETTER_COMPUTE_PROFILE || undefined))
        : undefined,
    };
    if (global.tenant !== undefined && !isTenantId(global.tenant)) {
      throw new CliError(
        'INVALID_ARGUMENT',
        `--tenant must be a tenant id such as acme (got "${global.tenant}")`,
        {
          hint: 'Pass --tenant with a tenant id, or set BETTER_COMPUTE_TENANT.',
          details: { field: 'tenant' },
        },
      );
    }
    // Checked before the credential order is walked: a malformed --profile is a usage mistake
    // whichever credential would have applied.
    const profileFlag = parsed.flags.profile;
    if (typeof profileFlag === 'string') assertProfileName(profileFlag, '--profile');
    else if ((token || 'profile' in (command.flags ?? {})) && io.env.BETTER_COMPUTE_PROFILE)
      assertProfileName(io.env.BETTER_COMPUTE_PROFILE, 'BETTER_COMPUTE_PROFILE');
    const flags: Record<string, unknown> = {};
    for (const key of Object.keys(command.flags ?? {})) flags[key] = parsed.flags[key];

    const opened: ComputeInstance[] = [];
    let computePromise: Promise<ComputeInstance> | undefined;
    let apiPromise: Promise<CliApi> | undefined;
    const compute = (): Promise<ComputeInstance> =>
      (computePromise ??= loadCompute({ configPath: global.config, cwd: io.cwd, env: io.env }).then(
        (instance) => {
          opened.push(instance);
          return instance;
        },
      ));
    const print = (value: unknown): void => {
      const text = formatResult(value, {
        format: global.format,
        defaultFormat:
          typeof command.defaultFormat === 'function' ? command.defaultFormat(flags) : command.defaultFormat,
        query: global.query,
        tableRows: command.tableRows?.bind(command),
      });
      if (text !== undefined) io.out(text);
    };
    const context: CommandContext = {
      flags: flags as CommandContext['flags'],
      args: parsed.args as CommandContext['args'],
      rest: parsed.rest,
      io,
      global,
      api: () =>
        (apiPromise ??= import('./transport.js').then((transport) =>
          transport.createCliApi({ io, global, compute }),
        )),
      compute,
      print,
      log: (line) => io.err(safeText(line)),
      status: (line) => io.status?.(line === null ? null : safeCell(line)),
      program,
      commandName: command.name,
    };
    try {
      const result = await command.run(context);
      if (result !== undefined) print(result);
      return result;
    } catch (error) {
      noteCommand(error, command.name);
      throw error;
    } finally {
      // A command may have handed its deployment on (serve closes its own); a second close is harmless.
      for (const instance of opened) await instance.close().catch(() => undefined);
    }
  }

  return {
    run,
    manifest: () => buildManifest(base.list(), groups),
    registry: base,
  };
}

/**
 * A command that is also a group: `release RSV` releases a reservation, and `release keygen`,
 * `release sign`, … are the release tools. The registry matches the longest name first, so the
 * group's words reach their commands; the word after such a command is its argument, and one that is
 * not of the argument's kind but is a typo of a command word (`release kegen`) is refused as that,
 * never sent as an id. Any other word meets the argument's own check.
 */
function refuseMistypedCommandWord(
  registry: CommandRegistry,
  command: AnyCommand,
  next: string | undefined,
): void {
  const first = command.positionals?.[0];
  if (next === undefined || next.startsWith('-') || !first?.kind || isId(first.kind, next)) return;
  if (looksLikeSecret(next)) return;
  const group = command.name;
  const under = [
    ...new Set(
      registry
        .names()
        .filter((name) => name.startsWith(`${group} `))
        .map((name) => name.slice(group.length + 1).split(' ')[0]!),
    ),
  ];
  const near = didYouMean(next, under);
  if (near === undefined) return;
  throw new CliError(
    'INVALID_COMMAND',
    `"${next}" is neither ${idKindPhrase(first.kind)} (${ID_PREFIXES[first.kind]}_…) nor a command under "${group}" (${under.join(', ')}); did you mean "${group} ${near}"?`,
    {
      hint: `Run "better-compute help ${group}" for both.`,
      details: { command: `${group} ${next}`, suggestion: `${group} ${near}` },
    },
  );
}

function warnProject(io: ResolvedIO, error: unknown): void {
  const code =
    typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : 'INVALID_CONFIG';
  const message = error instanceof Error ? error.message : String(error);
  io.err(safeText(`warning: the configuration's commands are left out: ${code}: ${message}`));
}

let defaultCli: ComputeCli | undefined;

/**
 * Runs one command line with the built-in commands (and the configuration's); rejects with the
 * failure's ComputeError, CliError or ComputeClientError.
 */
export function runCli(argv: readonly string[], io?: CliIO): Promise<unknown> {
  defaultCli ??= createCli();
  return defaultCli.run(argv, io);
}

/**
 * Behaves like the binary: prints `CODE: message` and a hint on failure, and resolves with the exit
 * status (0, 2 for a usage mistake, 1 otherwise, or a remote program's own status).
 */
export async function main(
  argv: readonly string[] = process.argv.slice(2),
  cli?: ComputeCli,
  io?: CliIO,
): Promise<number> {
  const theIO = io ?? processIO();
  try {
    await (cli ?? (defaultCli ??= createCli())).run(argv, theIO);
    return 0;
  } catch (error) {
    printFailure(error, theIO);
    return exitStatusOf(error);
  }
}
