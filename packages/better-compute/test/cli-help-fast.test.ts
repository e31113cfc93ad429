/**
 * The entry's help pages (help-fast.ts, from the manifest the build writes) against the program's:
 * every line the entry answers must print the same bytes the CLI would, and the common help lines
 * must be answered there (or `help` parses the whole CLI again).
 */
import { describe, expect, it } from 'vitest';
import { helpFromManifest, manifestIndex, mayAnswerHelp } from '../src/cli/help-fast.js';
import type { Manifest } from '../src/cli/manifest.js';
import { createCli, main } from '../src/cli/program.js';
import { captureIO } from './cli-support.js';

const cli = createCli({ projectCommands: false });
// What the build writes: the manifest through JSON, and its index.
const whole = JSON.parse(JSON.stringify(cli.manifest())) as Manifest;
const index = JSON.parse(JSON.stringify(manifestIndex(whole))) as Manifest;
const load = (all: boolean): Manifest => (all ? whole : index);

async function programPrints(argv: string[]): Promise<{ status: number; out: string }> {
  const { io, out } = captureIO();
  const status = await main(argv, cli, io);
  return { status, out: out.join('\n') };
}

const names = whole.commands.map((c) => c.name);
const groups = [...new Set(names.filter((n) => n.includes(' ')).map((n) => n.split(' ')[0]!))].filter(
  (g) => !names.includes(g),
);

describe('help from the built manifest', () => {
  const answered: string[][] = [
    [],
    ['help'],
    ['--help'],
    ['-h'],
    ['help', '--json'],
    ...names.map((n) => ['help', ...n.split(' ')]),
    // `help --help` is the help command's own page, which the program renders.
    ...names.filter((n) => n !== 'help').map((n) => [...n.split(' '), '--help']),
    ...names.filter((n) => n !== 'help').map((n) => [...n.split(' '), '-h']),
    ...groups.map((g) => ['help', g]),
    ['completion', 'bash'],
    ['completion', 'zsh'],
    ['completion', 'fish'],
  ];

  it('answers the overview, every command page, every group page, --json and completion, byte for byte', async () => {
    expect(groups.length).toBeGreaterThan(3);
    for (const argv of answered) {
      const fast = helpFromManifest(argv, load);
      expect(fast, argv.join(' ')).toBeTypeOf('string');
      expect({ argv, ...(await programPrints(argv)) }).toEqual({ argv, status: 0, out: fast });
    }
  });

  it('leaves everything else to the program', async () => {
    const left: string[][] = [
      ['help', 'nosuch'],
      ['help', 'migrate', 'extra'],
      ['help', '--json', 'api'],
      ['help', 'api', '--format', 'json'],
      ['help', '--help'],
      ['auth'],
      ['auth', '--help'],
      ['nosuch', '--help'],
      ['serve', '--port', '1', '--help'],
      ['version'],
      ['doctor'],
      ['completion'],
      ['completion', 'tcsh'],
      ['completion', 'bash', '--format', 'json'],
    ];
    for (const argv of left) expect(helpFromManifest(argv, load), argv.join(' ')).toBeUndefined();
  });

  it('never answers when a configuration is named', () => {
    expect(mayAnswerHelp(['help'], {})).toBe(true);
    expect(mayAnswerHelp(['help'], { BETTER_COMPUTE_CONFIG: 'x.mjs' })).toBe(false);
    expect(mayAnswerHelp(['help', '--config', 'x.mjs'], {})).toBe(false);
    expect(mayAnswerHelp(['help', '--config=x.mjs'], {})).toBe(false);
  });
});
