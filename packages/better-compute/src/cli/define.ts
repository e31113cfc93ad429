/**
 * The command model. A command is data: its name, help group, summary, target, typed flags and
 * positionals, examples and the methods it calls, plus `run(context)`. Help, the manifest,
 * completion, "did you mean" and `computeCommands` are all derived from these definitions.
 *
 * This file must stay light: `version` and `help` load it, and neither may load zod or the server.
 */
import type { IdKind } from '@better-compute/core';
import type { CliIO } from './io.js';
import type { CliApi } from './transport-types.js';
import type { ComputeInstance } from '../types.js';

/** What a command needs: a credential (`token`), the configuration (`config`), or neither. */
export type CommandTarget = 'token' | 'config' | 'none';

export type OutputFormat = 'json' | 'compact' | 'table';

interface FlagBase {
  description: string;
  required?: boolean;
  /** The value's name in help: `--pool ID`. */
  placeholder?: string;
}

export interface StringFlag extends FlagBase {
  type: 'string';
  default?: string;
  choices?: readonly string[];
  /** Given several times or comma-separated; the value is an array. */
  repeated?: boolean;
  /**
   * Also taken as the command's one argument (`sites create fra-1` as well as `--name fra-1`);
   * both given and different is a usage mistake. Only for a command without positionals.
   */
  argument?: boolean;
}
export interface NumberFlag extends FlagBase {
  type: 'number';
  default?: number;
  integer?: boolean;
  min?: number;
  max?: number;
}
export interface BooleanFlag extends FlagBase {
  type: 'boolean';
  /** `--x` sets true, `--no-x` false; false when absent unless a default says otherwise. */
  default?: boolean;
}
export interface DurationFlag extends FlagBase {
  type: 'duration';
  /** A duration such as `20s` or `4h`; the value is whole seconds. */
  default?: string;
  /** The shortest and longest the server takes, as durations (`1m`, `30d`): refused before sending, named by the flag. */
  min?: string;
  max?: string;
}
export interface IdFlag extends FlagBase {
  type: 'id';
  /** The id kind the value must look like (`pool` → `pool_01…`), checked before anything is sent. */
  kind: IdKind;
  repeated?: boolean;
  default?: undefined;
}

export type FlagSpec = StringFlag | NumberFlag | BooleanFlag | DurationFlag | IdFlag;
/** Flags by their key in code (camelCase); on the command line they are kebab-case (`ifVersion` → `--if-version`). */
export type FlagSpecs = Record<string, FlagSpec>;

export interface PositionalSpec {
  name: string;
  description: string;
  required?: boolean;
  /** Takes every remaining argument; only the last positional may. */
  variadic?: boolean;
  kind?: IdKind;
}

type ScalarOf<F> = F extends { type: 'string'; choices: readonly (infer C)[] }
  ? C
  : F extends { type: 'string' | 'id' }
    ? string
    : F extends { type: 'number' | 'duration' }
      ? number
      : F extends { type: 'boolean' }
        ? boolean
        : never;

export type FlagValue<F> = F extends { repeated: true }
  ? ScalarOf<F>[]
  : F extends { type: 'boolean' }
    ? boolean
    : F extends { required: true } | { default: string | number | boolean }
      ? ScalarOf<F>
      : ScalarOf<F> | undefined;

export type FlagValues<F extends FlagSpecs> = { -readonly [K in keyof F]: FlagValue<F[K]> };

export type PositionalValues<P extends readonly PositionalSpec[]> = {
  [S in P[number] as S['name']]: S extends { variadic: true }
    ? string[]
    : S extends { required: true }
      ? string
      : string | undefined;
};

/** The flags every command of a target shares, resolved with their environment defaults. */
export interface GlobalOptions {
  format: OutputFormat | undefined;
  query: string | undefined;
  /** `--url`, else BETTER_COMPUTE_URL. */
  url: string | undefined;
  /** `--tenant`, else BETTER_COMPUTE_TENANT. */
  tenant: string | undefined;
  /** `--config` (the loader itself falls back to BETTER_COMPUTE_CONFIG). */
  config: string | undefined;
  /** `--profile`, else BETTER_COMPUTE_PROFILE. */
  profile: string | undefined;
}

/** The manifest (manifest.ts builds it): every command as data, for `help --json`, the reference and completion. */
export interface ManifestFlag {
  /** As typed, without dashes: `if-version`. */
  name: string;
  type: FlagSpec['type'];
  description: string;
  required: boolean;
  repeated: boolean;
  /** Shared by every command of the target (`--format`, `--url`, …). */
  shared: boolean;
  default?: string | number | boolean;
  choices?: string[];
  /** The id kind of an `id` flag. */
  kind?: string;
  placeholder?: string;
}

export interface ManifestCommand {
  name: string;
  group: string;
  summary: string;
  description?: string;
  target: CommandTarget;
  project: boolean;
  flags: ManifestFlag[];
  positionals: PositionalSpec[];
  examples: string[];
  calls: string[];
}

export interface Manifest {
  program: string;
  version: string;
  groups: HelpGroup[];
  commands: ManifestCommand[];
}

/** What the program running a command offers it: the other commands, for help and completion. */
export interface ProgramView {
  readonly name: string;
  /** Every command, the configuration's project commands included when one is found. */
  commands(): Promise<readonly AnyCommand[]>;
  manifest(): Promise<Manifest>;
}

/** A CliIO with its defaults filled in. */
export interface ResolvedIO extends CliIO {
  err(message: string): void;
  cwd: string;
}

export interface CommandContext<
  F extends FlagSpecs = FlagSpecs,
  P extends readonly PositionalSpec[] = readonly PositionalSpec[],
> {
  flags: FlagValues<F>;
  args: PositionalValues<P>;
  /** The words after `--`, untouched. */
  rest: string[];
  io: ResolvedIO;
  global: GlobalOptions;
  /** The transport of token commands: `--url` over HTTP, else the configuration's handler in process. */
  api(): Promise<CliApi>;
  /** The configured deployment, for config commands; closed when the command ends. */
  compute(): Promise<ComputeInstance>;
  /** Prints a value through the output formatter (`--format`, `--query`, terminal safety). */
  print(value: unknown): void;
  /** A progress line on stderr, terminal-safe. */
  log(line: string): void;
  /**
   * A status line rewritten in place on a terminal (null clears it); nothing where stderr is not
   * a terminal. For what changes every second, such as the time a wait has taken.
   */
  status(line: string | null): void;
  program: ProgramView;
  /** The command's full name, `auth login`. */
  commandName: string;
}

export interface CommandDefinition<
  F extends FlagSpecs = FlagSpecs,
  P extends readonly PositionalSpec[] = readonly PositionalSpec[],
> {
  /** One or more lowercase words: `version`, `auth login`, `sandbox-template create`. */
  name: string;
  /** The help group; project commands default to `Project`. */
  group?: string;
  summary: string;
  description?: string;
  target: CommandTarget;
  flags?: F;
  positionals?: P;
  examples?: readonly string[];
  /** The hint when an argument is given that the command does not take (`auth login` reads its token from standard input). */
  argumentsHint?: string;
  /** The methods `run` calls (`system.whoami`); a test checks each exists in the method table. */
  calls?: readonly string[];
  /** The format when `--format` is not given: lists default to `table`. A function decides by the flags. */
  defaultFormat?: OutputFormat | ((flags: Record<string, unknown>) => OutputFormat);
  /** False for commands whose output is not a result (`serve`, `completion`): no --format/--query. */
  output?: boolean;
  /** The rows `--format table` shows, when they are not the result itself or its `items`. */
  tableRows?(result: unknown): unknown[] | undefined;
  /** Runs the command; a returned value other than undefined is printed through the formatter. */
  run(context: CommandContext<F, P>): unknown;
}

// Method syntax above keeps `run` bivariant, so a command with typed flags is an AnyCommand.
export type AnyCommand = CommandDefinition<FlagSpecs, readonly PositionalSpec[]>;

/**
 * Declares a command; returns its argument, typed.
 *
 * @example
 * export default defineCommand({
 *   name: 'seed', summary: 'Create the demo sites', target: 'config',
 *   flags: { region: { type: 'string', description: 'Region label', default: 'eu' } },
 *   async run({ compute, flags }) { … },
 * });
 */
export function defineCommand<
  const F extends FlagSpecs = {},
  const P extends readonly PositionalSpec[] = readonly [],
>(definition: CommandDefinition<F, P>): CommandDefinition<F, P> {
  return definition;
}

export interface HelpGroup {
  name: string;
  summary: string;
}

/** The help groups, in the order `help` lists them. A command must name one of these. */
export const HELP_GROUPS: readonly HelpGroup[] = [
  { name: 'Start', summary: 'Learn the CLI and start a project' },
  { name: 'Operate', summary: 'Run and maintain a deployment' },
  { name: 'Auth', summary: 'Credentials for token commands' },
  { name: 'API', summary: 'Call any method' },
  { name: 'Capacity', summary: 'Pools, capacity and reservations' },
  { name: 'Nodes', summary: 'Machines, join tokens and inventory' },
  { name: 'VPS', summary: 'Instances, images and flavors' },
  { name: 'Sandboxes', summary: 'Agent sandboxes, templates, snapshots and volumes' },
  { name: 'Access', summary: 'Consoles, exec, port forwarding and SSH certificates' },
  { name: 'Events', summary: 'Events, webhooks and usage' },
  { name: 'Fleet', summary: 'Sites, projects, releases, rollouts and fleet configuration' },
  { name: 'Batches', summary: 'The destructive-batch quorum' },
  { name: 'Audit', summary: 'The tamper-evident audit log' },
  { name: 'PKI', summary: 'Machine certificates and signing keys' },
  { name: 'Compute', summary: 'better-compute commands inside another CLI' },
  { name: 'Project', summary: 'Commands of this configuration' },
];

/**
 * The `--name` of a create: the guide's form, and the command's one argument too (`sites create
 * fra-1`), so every create takes its name both ways (docs/decisions/cli-create-names.md).
 */
export function nameFlag(description: string) {
  return {
    type: 'string',
    required: true,
    argument: true,
    description: `${description}; also taken as the argument NAME`,
    placeholder: 'NAME',
  } as const satisfies StringFlag;
}

/** `ifVersion` → `if-version`. */
export function kebabCase(key: string): string {
  return key.replace(/[A-Z]/g, (char) => `-${char.toLowerCase()}`);
}
