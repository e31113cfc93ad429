/**
 * Completion scripts, sourced in the real bash, zsh (through bashcompinit) and fish. The shells are
 * installed from Debian's packages when missing; if that fails, the suite fails rather than
 * skipping silently.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { createCli, defineCommand, type AnyCommand } from '../src/cli/index.js';
import { captureIO } from './cli-support.js';

const dir = mkdtempSync(join(tmpdir(), 'bc-completion-'));
const pwned = join(dir, 'pwned');

function hasShell(shell: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${shell}`]).status === 0;
}

beforeAll(() => {
  if (['bash', 'zsh', 'fish'].every(hasShell)) return;
  execFileSync('apt-get', ['update'], { stdio: 'inherit' });
  execFileSync('apt-get', ['install', '-y', 'zsh', 'fish'], {
    stdio: 'inherit',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  for (const shell of ['bash', 'zsh', 'fish'])
    if (!hasShell(shell)) throw new Error(`${shell} is not installed`);
}, 300_000);

const project: AnyCommand[] = [
  defineCommand({
    name: 'seed',
    summary: 'Create the demo sites and pools',
    target: 'none',
    flags: { region: { type: 'string', choices: ['eu', 'us', 'ap-south'], description: 'Region label' } },
    run: () => undefined,
  }) as AnyCommand,
  // Hostile definitions: none of this may run when a script is sourced or a word completed.
  defineCommand({
    name: `evil$(touch ${pwned})`,
    summary: `'; touch ${pwned}; echo '`,
    target: 'none',
    run: () => undefined,
  }) as AnyCommand,
  defineCommand({
    name: 'hostile',
    summary: `$(touch ${pwned}) \`touch ${pwned}\` it\\'s \u001b]0;title\u0007 \u009b2J \u2028 done`,
    target: 'none',
    flags: {
      mode: {
        type: 'string',
        choices: ['safe', `$(touch ${pwned})`, "a'b", 'x;y'],
        description: `mode'; touch ${pwned} #`,
      },
    },
    run: () => undefined,
  }) as AnyCommand,
];

async function script(shell: string): Promise<string> {
  const cli = createCli({ projectCommands: false, commands: project });
  const { io, out } = captureIO({});
  await cli.run(['completion', shell], io);
  const path = join(dir, `completion.${shell}`);
  writeFileSync(path, `${out.join('\n')}\n`);
  return path;
}

const q = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`;

function bash(file: string, words: string[]): string[] {
  const line = ['better-compute', ...words];
  const code = `source ${q(file)}
COMP_WORDS=(${line.map(q).join(' ')}); COMP_CWORD=${line.length - 1}; COMP_LINE=${q(line.join(' '))}
_better_compute better-compute ${q(line.at(-1)!)} ${q(line.at(-2)!)}
printf '%s\\n' "\${COMPREPLY[@]}"`;
  const result = spawnSync('bash', ['--norc', '--noprofile', '-c', code], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', HOME: dir },
  });
  expect(result.stderr).toBe('');
  return result.stdout.split('\n').filter(Boolean).sort();
}

function zsh(file: string, words: string[]): string[] {
  const line = ['better-compute', ...words];
  // What bashcompinit's _bash_complete does before it hands the matches to compadd: set COMP_WORDS
  // and COMP_CWORD, then run its compgen -F, which calls our function in sh emulation.
  const code = `source ${q(file)}
[[ $_comps[better-compute] == '_bash_complete -o default -F _better_compute' ]] || { print -u2 "not registered: $_comps[better-compute]"; exit 3 }
words=(${line.map(q).join(' ')}); CURRENT=${line.length}
COMP_WORDS=( "\${words[@]}" ); COMP_CWORD=$(( CURRENT - 1 ))
compgen -F _better_compute -- ${q(line.at(-1)!)}`;
  const result = spawnSync('zsh', ['-f', '-c', code], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', HOME: dir, ZDOTDIR: dir },
  });
  expect(result.stderr).toBe('');
  expect(result.status).toBe(0);
  return result.stdout.split('\n').filter(Boolean).sort();
}

function fish(file: string, words: string[]): string[] {
  const line = `better-compute ${words.join(' ')}`;
  const result = spawnSync('fish', ['--no-config', '-c', `source ${q(file)}; complete -C ${q(line)}`], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', HOME: dir, XDG_CONFIG_HOME: dir, XDG_DATA_HOME: dir },
  });
  expect(result.stderr).toBe('');
  return result.stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split('\t')[0]!)
    .sort();
}

describe.each([
  ['bash', bash],
  ['zsh', zsh],
  ['fish', fish],
] as const)('completion %s, sourced in the real shell', (shell, complete) => {
  let file: string;
  beforeAll(async () => {
    file = await script(shell);
  });

  it('completes command words', () => {
    expect(complete(file, ['au'])).toEqual(['audit', 'auth']);
    expect(complete(file, ['aut'])).toEqual(['auth']);
    expect(complete(file, ['audit', 'c'])).toEqual(['check-proof', 'checkpoint']);
    expect(complete(file, ['auth', ''])).toEqual(['login', 'logout', 'status']);
    expect(complete(file, ['se'])).toEqual(['secrets', 'seed', 'serve']);
  });

  it('completes the flags of the command on the line', () => {
    expect(complete(file, ['doctor', '--st'])).toEqual(['--strict']);
    expect(complete(file, ['auth', 'login', '--no-v'])).toEqual(['--no-verify']);
  });

  it('completes the values of flags with choices', () => {
    expect(complete(file, ['serve', '--roles', '']).sort()).toEqual([
      'api',
      'controllers',
      'gateway',
      'sinks',
    ]);
    expect(complete(file, ['api', '--format', 't'])).toEqual(['table']);
    expect(complete(file, ['seed', '--region', ''])).toEqual(['ap-south', 'eu', 'us']);
  });

  it('runs nothing a hostile project command defines, and leaves out what is not plain', () => {
    // fish also offers fuzzy matches (r-e-ser-v-at-i-ons for "evi"); none may be the hostile name.
    expect(complete(file, ['evi']).filter((word) => word.startsWith('evil'))).toEqual([]);
    expect(complete(file, ['hostile', '--mode', ''])).toEqual(['safe']);
    expect(complete(file, ['ho'])).toEqual(['hostile']);
    expect(existsSync(pwned)).toBe(false);
  });
});

describe('the scripts themselves', () => {
  it('hold no control characters, and no hostile name or choice', async () => {
    for (const shell of ['bash', 'zsh', 'fish']) {
      const text = await import('node:fs').then((fs) =>
        fs.readFileSync(join(dir, `completion.${shell}`), 'utf8'),
      );
      expect(text).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029]/);
      expect(text).not.toContain('evil');
      expect(text).not.toContain("a'b");
      expect(text).not.toContain('x;y');
    }
    expect(existsSync(pwned)).toBe(false);
  });

  it('describes --no-verify as what it does in fish, not as --verify', () => {
    const file = join(dir, 'completion.fish');
    const result = spawnSync(
      'fish',
      ['--no-config', '-c', `source ${q(file)}; complete -C ${q('better-compute auth login --')}`],
      {
        encoding: 'utf8',
        env: { PATH: process.env.PATH ?? '', HOME: dir, XDG_CONFIG_HOME: dir, XDG_DATA_HOME: dir },
      },
    );
    const lines = result.stdout.split('\n').filter((l) => /^--(no-)?verify\t/.test(l));
    expect(lines.sort()).toEqual([
      '--no-verify\tDo not check the token with system.whoami before saving it',
      '--verify\tCheck the token with system.whoami before saving it',
    ]);
  });

  it('quotes a hostile description in fish so that it stays text', async () => {
    const text = await import('node:fs').then((fs) => fs.readFileSync(join(dir, 'completion.fish'), 'utf8'));
    const line = text.split('\n').find((l) => l.includes("-a 'hostile'"))!;
    expect(
      line.startsWith(
        `complete -c better-compute -n '__better_compute_at' -a 'hostile' -d '$(touch ${pwned}) \`touch ${pwned}\` it ’s ]0;title 2J`,
      ),
    ).toBe(true);
    // Exactly three single-quoted words: the condition, the word and the description.
    expect(line.split("'")).toHaveLength(7);
    expect(line.endsWith("'")).toBe(true);
  });
});
