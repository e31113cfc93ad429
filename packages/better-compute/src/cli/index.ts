/**
 * better-compute/cli: the command framework and the built-in commands, for programs, tests and
 * other CLIs. `runCli` runs one command line; `createCli` adds your commands; `main` behaves like
 * the binary; `computeCommands` puts compute's commands into another framework.
 */
export {
  defineCommand,
  HELP_GROUPS,
  kebabCase,
  type AnyCommand,
  type BooleanFlag,
  type CommandContext,
  type CommandDefinition,
  type CommandTarget,
  type DurationFlag,
  type FlagSpec,
  type FlagSpecs,
  type FlagValue,
  type FlagValues,
  type GlobalOptions,
  type HelpGroup,
  type IdFlag,
  type NumberFlag,
  type OutputFormat,
  type PositionalSpec,
  type PositionalValues,
  type ProgramView,
  type ResolvedIO,
  type StringFlag,
} from './define.js';
export { createCli, main, runCli, type CliOptions, type ComputeCli } from './program.js';
export { processIO, type CliIO, type CliTerminal } from './io.js';
export { CliError, RemoteExitError, exitStatusOf, hintFor, printFailure, toFailure } from './errors.js';
export { CommandRegistry, type RegisteredCommand } from './registry.js';
export { buildManifest, type Manifest, type ManifestCommand, type ManifestFlag } from './manifest.js';
export { applyQuery, formatResult, renderTable, type FormatOptions } from './output.js';
export { completionScript, safeDescription, SHELLS, type Shell } from './completion.js';
export { buildApiInput, parseItem, type ItemSources } from './api-items.js';
export { builtinCommands } from './commands/index.js';
export {
  computeCommands,
  type ComputeCommandsOptions,
  type HostCommandSpec,
  type HostRunContext,
} from './compute-commands.js';
export type { CliApi, CredentialInfo } from './transport-types.js';
export { ComputeClientError } from '@better-compute/client';
