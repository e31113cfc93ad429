/**
 * The manifest: every command as data (`help --json`), the source of the CLI reference and of the
 * completion scripts.
 */
import { PRODUCT, VERSION } from '@better-compute/core';
import type { CommandTarget, FlagSpec, HelpGroup, PositionalSpec } from './define.js';
import { kebabCase } from './define.js';
import { globalFlagsOf } from './global-flags.js';
import type { RegisteredCommand } from './registry.js';

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

function flagOf(key: string, spec: FlagSpec, shared: boolean): ManifestFlag {
  const flag: ManifestFlag = {
    name: kebabCase(key),
    type: spec.type,
    description: spec.description,
    required: spec.required === true,
    repeated: (spec.type === 'string' || spec.type === 'id') && spec.repeated === true,
    shared,
  };
  if (spec.default !== undefined) flag.default = spec.default;
  if (spec.type === 'string' && spec.choices) flag.choices = [...spec.choices];
  if (spec.type === 'id') flag.kind = spec.kind;
  if (spec.placeholder) flag.placeholder = spec.placeholder;
  return flag;
}

export function manifestCommand(entry: RegisteredCommand): ManifestCommand {
  const { command } = entry;
  const shared = globalFlagsOf(command);
  const result: ManifestCommand = {
    name: command.name,
    group: entry.group,
    summary: command.summary,
    target: command.target,
    project: entry.project,
    flags: [
      ...Object.entries(command.flags ?? {}).map(([key, spec]) => flagOf(key, spec, false)),
      ...Object.entries(shared).map(([key, spec]) => flagOf(key, spec, true)),
    ],
    positionals: (command.positionals ?? []).map((p) => ({ ...p })),
    examples: [...(command.examples ?? [])],
    calls: [...(command.calls ?? [])],
  };
  if (command.description) result.description = command.description;
  return result;
}

export function buildManifest(
  entries: readonly RegisteredCommand[],
  groups: readonly HelpGroup[],
  program = PRODUCT,
): Manifest {
  return {
    program,
    version: VERSION,
    groups: groups.map((g) => ({ ...g })),
    commands: entries.map(manifestCommand),
  };
}
