/**
 * `help` without the CLI: the entry (bin.ts) answers the common help lines from the built-in
 * commands' manifest, written to `dist/cli/help.json` at build time, so a help page parses neither
 * the command definitions nor the CLI's bundle. It answers only what the program would print the
 * same way: the overview, `help COMMAND`, `help GROUP`, `COMMAND --help`, `help --json` and
 * `completion SHELL` (run at every shell's start), with no
 * configuration in reach (its project commands would be listed too). Anything else (an unknown
 * word, a flag, a configuration) is left to the program: `helpFromManifest` returns undefined.
 * test/cli-help-fast.test.ts holds the two to the same bytes.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { safeJson, safeText } from '@better-compute/core';
import { findConfigFile } from '../config/find-config.js';
import { completionScript, SHELLS } from './completion.js';
import { renderCommand, renderOverview, renderPrefix } from './help.js';
import type { Manifest } from './manifest.js';

const isHelpFlag = (token: string): boolean => token === '--help' || token === '-h';

/** The text the program would print on stdout for this help line (without the line end), or undefined. */
export function helpFromManifest(
  argv: readonly string[],
  load: (whole: boolean) => Manifest,
): string | undefined {
  // The overview and a group's page need only names, groups and summaries: the index, a tenth of
  // the whole manifest, which a command's page and `help --json` read.
  const manifest = load(false);
  const names = new Set(manifest.commands.map((c) => c.name));
  let tokens = [...argv];
  if (tokens.length === 0) tokens = ['help'];
  else if (isHelpFlag(tokens[0]!)) tokens = ['help', ...tokens.slice(1)];
  // `completion SHELL`; `completion --help` is a command's page, below.
  const shell = tokens[1];
  if (tokens[0] === 'completion' && tokens.length === 2 && (SHELLS as readonly string[]).includes(shell!))
    return names.has('completion') ? safeText(completionScript(shell!, load(true))) : undefined;
  if (tokens[0] !== 'help' || !names.has('help')) {
    // `COMMAND --help`: the command's page, when its words are a command's whole name.
    const last = tokens[tokens.length - 1]!;
    const words = tokens.slice(0, -1);
    if (!isHelpFlag(last) || words.some((word) => word.startsWith('-'))) return undefined;
    if (!names.has(words.join(' '))) return undefined;
    return commandPage(load(true), words.join(' '));
  }
  const rest = tokens.slice(1);
  const json = rest.length === 1 && rest[0] === '--json';
  if (json) return safeJson(JSON.stringify(load(true), null, 2));
  if (rest.some((word) => word.startsWith('-'))) return undefined;
  if (rest.length === 0) return safeText(renderOverview(manifest));
  const name = rest.join(' ');
  if (names.has(name)) return commandPage(load(true), name);
  // `help auth`: a group's page, unless a shorter prefix is a command (the program refuses the extra words).
  for (let n = rest.length - 1; n > 0; n--) if (names.has(rest.slice(0, n).join(' '))) return undefined;
  if (manifest.commands.some((c) => c.name.startsWith(`${name} `)))
    return safeText(renderPrefix(manifest, name));
  return undefined;
}

function commandPage(manifest: Manifest, name: string): string | undefined {
  const command = manifest.commands.find((c) => c.name === name);
  return command ? safeText(renderCommand(manifest, command)) : undefined;
}

/** The index of a manifest: what the overview and a group's page print. */
export function manifestIndex(manifest: Manifest): Manifest {
  return {
    ...manifest,
    commands: manifest.commands.map(
      (c) => ({ name: c.name, group: c.group, summary: c.summary }) as Manifest['commands'][number],
    ),
  };
}

/** Whether a help line could be answered from the manifest: no configuration's commands can apply. */
export function mayAnswerHelp(argv: readonly string[], env: Record<string, string | undefined>): boolean {
  if (env.BETTER_COMPUTE_CONFIG) return false;
  return !argv.some((token) => token === '--config' || token.startsWith('--config='));
}

/**
 * What the entry prints for this line from the manifest the build wrote beside this bundle
 * (`dist/cli/help.json`, `help-index.json`), or undefined when the program must answer.
 */
export function answerFromBuiltManifest(argv: readonly string[]): string | undefined {
  if (!mayAnswerHelp(argv, process.env)) return undefined;
  try {
    if (findConfigFile({ cwd: process.cwd(), env: process.env })) return undefined;
    return helpFromManifest(
      argv,
      (whole) =>
        JSON.parse(
          readFileSync(join(__dirname, whole ? 'help.json' : 'help-index.json'), 'utf8'),
        ) as Manifest,
    );
  } catch {
    return undefined; // no manifest (a build without one): the program answers
  }
}
