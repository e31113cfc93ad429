/**
 * The manifest: every command as data (`help --json`), the source of the CLI reference and of the
 * completion scripts.
 */
import { PRODUCT, VERSION } from '@better-compute/core';
import type { FlagSpec, HelpGroup, Manifest, ManifestCommand, ManifestFlag } from './define.js';
import { kebabCase } from './define.js';
import { globalFlagsOf } from './global-flags.js';
import type { RegisteredCommand } from './registry.js';

// The manifest's shape lives with the command model it describes, which the program view returns.
export type { Manifest, ManifestCommand, ManifestFlag } from './define.js';

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
