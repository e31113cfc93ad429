/**
 * Help text, rendered from the manifest. The caller prints it through safeText, since project
 * commands bring their own words.
 */
import { ID_PREFIXES, idKindPhrase, type IdKind } from '@better-compute/core';
import type { Manifest, ManifestCommand, ManifestFlag } from './manifest.js';

function columns(rows: [string, string][], indent = '  '): string[] {
  const width = Math.min(34, Math.max(0, ...rows.map(([left]) => left.length)));
  return rows.map(([left, right]) =>
    right ? `${indent}${left.padEnd(width)}  ${right}` : `${indent}${left}`,
  );
}

/** `help`: every command, by group. */
export function renderOverview(manifest: Manifest): string {
  const lines = [
    `${manifest.program} ${manifest.version}: the control plane for GPU and VPS fleets`,
    '',
    `Usage: ${manifest.program} COMMAND [flags]`,
  ];
  for (const group of manifest.groups) {
    const commands = manifest.commands.filter((c) => c.group === group.name);
    if (commands.length === 0) continue;
    lines.push('', `${group.name}: ${group.summary}`);
    lines.push(...columns(commands.map((c) => [c.name, c.summary])));
  }
  lines.push(
    '',
    `Run "${manifest.program} help COMMAND" for a command's flags and examples, "${manifest.program} help --json" for all of them.`,
  );
  return lines.join('\n');
}

/** `help auth`: the commands under a word. */
export function renderPrefix(manifest: Manifest, prefix: string): string {
  const commands = manifest.commands.filter((c) => c.name.startsWith(`${prefix} `));
  return [
    `${manifest.program} ${prefix}: ${commands.length} ${commands.length === 1 ? 'command' : 'commands'}`,
    '',
    ...columns(commands.map((c) => [c.name, c.summary])),
  ].join('\n');
}

function flagLine(flag: ManifestFlag): [string, string] {
  let left = `--${flag.name}`;
  if (flag.type !== 'boolean') {
    const value = flag.choices
      ? flag.choices.join('|')
      : (flag.placeholder ??
        (flag.type === 'id' && flag.kind
          ? `${ID_PREFIXES[flag.kind as IdKind] ?? flag.kind}_…`
          : flag.type.toUpperCase()));
    left += ` ${value}`;
  }
  const notes: string[] = [];
  if (flag.required) notes.push('required');
  if (flag.repeated) notes.push('repeatable, or comma-separated');
  if (flag.type === 'duration') notes.push('a duration such as 30m, 4h or 1d');
  if (flag.type === 'boolean' && flag.default === true)
    notes.push(`default: on; --no-${flag.name} turns it off`);
  else if (flag.default !== undefined && flag.type !== 'boolean')
    notes.push(`default: ${String(flag.default)}`);
  return [left, notes.length ? `${flag.description} (${notes.join('; ')})` : flag.description];
}

/** `help COMMAND`: usage, flags with defaults and choices, and examples. */
export function renderCommand(manifest: Manifest, command: ManifestCommand): string {
  const positionals = command.positionals
    .map((p) => {
      const name = p.name.toUpperCase() + (p.variadic ? '…' : '');
      return p.required ? name : `[${name}]`;
    })
    .join(' ');
  const lines = [
    `${manifest.program} ${command.name}: ${command.summary}`,
    '',
    `Usage: ${manifest.program} ${command.name}${positionals ? ` ${positionals}` : ''}${command.flags.length ? ' [flags]' : ''}`,
  ];
  if (command.description) lines.push('', command.description);
  const target =
    command.target === 'token'
      ? 'a credential, and --url or a configuration'
      : command.target === 'config'
        ? 'the configuration (--config, BETTER_COMPUTE_CONFIG, the nearest better-compute.config.*, or BETTER_COMPUTE_DATABASE_URL)'
        : 'neither a credential nor a configuration';
  lines.push('', `Needs: ${target}`);
  if (command.positionals.length) {
    lines.push('', 'Arguments:');
    lines.push(
      ...columns(
        command.positionals.map((p) => [
          p.name.toUpperCase(),
          `${p.description}${p.kind ? ` (${idKindPhrase(p.kind)}, ${ID_PREFIXES[p.kind]}_…)` : ''}${p.required ? '' : ' (optional)'}`,
        ]),
      ),
    );
  }
  const own = command.flags.filter((f) => !f.shared);
  const shared = command.flags.filter((f) => f.shared);
  if (own.length) lines.push('', 'Flags:', ...columns(own.map(flagLine)));
  if (shared.length) lines.push('', 'Shared flags:', ...columns(shared.map(flagLine)));
  if (command.examples.length) lines.push('', 'Examples:', ...command.examples.map((e) => `  ${e}`));
  // A command that is also a group (`release RSV` and `release keygen`): help says both.
  const under = manifest.commands.filter((c) => c.name.startsWith(`${command.name} `));
  if (under.length)
    lines.push('', `Also under "${command.name}":`, ...columns(under.map((c) => [c.name, c.summary])));
  return lines.join('\n');
}
