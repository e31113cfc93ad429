/**
 * Issue 41: every refusal, hint, example and flag description of the CLI that names a flag names
 * one its command has (or a shared one: --url, --tenant, --format, …). Refusals are code, not data,
 * so the test reads the source (flag-mentions-support.ts): for each command of the manifest, every
 * `--word` in the literals of its definition and of the helpers under src/cli it reaches must be one
 * of that command's flags. A clause that names another command (`better-compute auth login --url …`)
 * is checked against that command's flags; one that names another program (`bcd join
 * --token-file`), or the arguments a command hands to a program it runs, is that program's.
 * The server's own messages answer every client and are no one command's: they are not read here.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { createCli } from '../src/cli/index.js';
import { FlagMentionScanner, type FlagMention } from './flag-mentions-support.js';

const cliDir = fileURLToPath(new URL('../src/cli', import.meta.url));

/** Programs whose own flags a hint or an example names beside ours, not this CLI's. */
const OTHER_PROGRAMS = ['bcd', 'ssh', 'ssh-keygen', 'sh', 'better-iam', 'npm', 'systemctl', 'curl'];

/**
 * Flags a command's text names that are deliberately not its own, each with why. Keep it short: a
 * hint that sends the person to another command names that command (`better-compute X --flag`).
 */
const ALLOWED: Record<string, { flags: string[]; why: string }> = {
  help: {
    flags: ['url', 'config'],
    why: 'help prints what the command it shows needs: --url or --config are that command’s shared flags',
  },
};

const manifest = createCli().manifest();
const flagsOf = new Map(
  manifest.commands.map((command) => [
    command.name,
    new Set([
      'help',
      ...command.flags.flatMap((flag) =>
        flag.type === 'boolean' ? [flag.name, `no-${flag.name}`] : [flag.name],
      ),
    ]),
  ]),
);

/** Why a mention is wrong, or undefined when it names a flag it may. */
function wrong(command: string, mention: FlagMention): string | undefined {
  if (mention.otherProgram) return undefined;
  const against = mention.namedCommand ?? command;
  if (flagsOf.get(against)?.has(mention.flag)) return undefined;
  if (!mention.namedCommand && ALLOWED[command]?.flags.includes(mention.flag)) return undefined;
  return `--${mention.flag} is not a flag of ${against} (${mention.where}: ${JSON.stringify(mention.text.slice(0, 120))})`;
}

type Unit = Parameters<FlagMentionScanner['mentions']>[0];

/** Each built-in command's definitions in the source: literal-named calls, else factory-made exports. */
async function commandUnits(scanner: FlagMentionScanner): Promise<Map<string, Unit[]>> {
  const files = FlagMentionScanner.sourceFiles(join(cliDir, 'commands'));
  const units = new Map<string, Unit[]>();
  const add = (name: string, unit: Unit) => units.set(name, [...(units.get(name) ?? []), unit]);
  for (const { name, unit } of scanner.literalCommands(files)) add(name, unit);
  // `export default nodeStateCommand('cordon', …)`: the command's name is known once it is made.
  for (const file of files) {
    const module = (await import(file)) as Record<string, unknown>;
    for (const [exportName, value] of Object.entries(module)) {
      const command = value as { name?: unknown; run?: unknown } | null;
      if (typeof command !== 'object' || command === null) continue;
      if (typeof command.run !== 'function' || typeof command.name !== 'string') continue;
      const unit = scanner.exportUnit(file, exportName);
      if (unit && !scanner.holdsLiteralCommand(unit)) add(command.name, unit);
    }
  }
  return units;
}

describe('every flag a command’s text names is one it has', () => {
  const scanner = new FlagMentionScanner(
    cliDir,
    manifest.commands.map((command) => command.name),
    OTHER_PROGRAMS,
  );
  let units: Map<string, Unit[]>;
  beforeAll(async () => {
    units = await commandUnits(scanner);
  });

  it('finds the definition of every command of the manifest in the source', () => {
    expect(manifest.commands.map((c) => c.name).filter((name) => !units.has(name))).toEqual([]);
  });

  it.each(manifest.commands.map((command) => [command.name]))('%s', (name) => {
    const mentions = units.get(name)!.flatMap((unit) => scanner.mentions(unit));
    expect(mentions.flatMap((mention) => wrong(name, mention) ?? [])).toEqual([]);
  });

  it('each allowed exception is still needed', () => {
    for (const [command, { flags }] of Object.entries(ALLOWED)) {
      const named = new Set(
        units
          .get(command)!
          .flatMap((unit) => scanner.mentions(unit))
          .filter((m) => !m.otherProgram && !m.namedCommand && !flagsOf.get(command)!.has(m.flag))
          .map((m) => m.flag),
      );
      expect([...named].sort(), command).toEqual([...flags].sort());
    }
  });
});

describe('the scanner finds what it is for', () => {
  // A small command tree with the mistake issue 41 found: a shared helper's refusal names --out
  // for a command whose flag is --secret-out; and the ways a mention is rightly someone else's.
  const root = mkdtempSync(join(tmpdir(), 'bc-flag-mentions-'));
  mkdirSync(join(root, 'commands', 'hooks'), { recursive: true });
  writeFileSync(
    join(root, 'commands', 'shared.ts'),
    `export function createOut(path: string, flag = '--out') {
      if (path) throw new Error('Pass --out the name of a file that does not exist yet.');
      return execFileSync('tar', ['--owner=0', path]);
    }
    export function unused() { return 'Pass --nowhere.'; }\n`,
  );
  writeFileSync(
    join(root, 'commands', 'hooks', 'create.ts'),
    `import { defineCommand } from '../../define.js';
    export default defineCommand({
      name: 'hooks create',
      flags: { secretOut: { type: 'string', description: 'Write it here (never over --secret-out)' } },
      async run({ flags }) {
        const { createOut } = await import('../shared.js');
        if (!flags.secretOut) throw new CliError('INVALID_ARGUMENT', 'run better-compute auth login --url X first, or bcd join --token-file F');
        return createOut(flags.secretOut);
      },
    });\n`,
  );
  const scanner = new FlagMentionScanner(root, ['hooks create', 'auth login'], OTHER_PROGRAMS);
  const [found] = scanner.literalCommands(FlagMentionScanner.sourceFiles(join(root, 'commands')));

  it('reaches a helper through a destructured dynamic import, and reads each clause’s owner', () => {
    expect(found!.name).toBe('hooks create');
    const mentions = scanner.mentions(found!.unit);
    expect(
      mentions.map(({ flag, namedCommand, otherProgram }) => ({ flag, namedCommand, otherProgram })),
    ).toEqual([
      { flag: 'secret-out', namedCommand: undefined, otherProgram: undefined },
      { flag: 'url', namedCommand: 'auth login', otherProgram: undefined },
      { flag: 'token-file', namedCommand: undefined, otherProgram: 'bcd' },
      { flag: 'out', namedCommand: undefined, otherProgram: undefined },
      { flag: 'owner', namedCommand: undefined, otherProgram: 'tar' },
    ]);
    expect(mentions.find((m) => m.flag === 'out')!.where).toBe('commands/shared.ts:2');
  });
});
