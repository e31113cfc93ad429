/**
 * How usage mistakes and failures read: the hint line and message stay one line, a pasted secret
 * is never echoed, "did you mean" never suggests what was typed, and hints fit the failed command.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ComputeError } from '@better-compute/core';
import { createCli, defineCommand, main, printFailure, type AnyCommand } from '../src/cli/index.js';
import { captureIO } from './cli-support.js';

const empty = mkdtempSync(join(tmpdir(), 'bc-failures-'));
const boom = defineCommand({
  name: 'boom',
  summary: 'Fail unexpectedly',
  target: 'none',
  run: () => {
    throw new Error('kaboom');
  },
}) as AnyCommand;
const cli = createCli({ projectCommands: false, commands: [boom] });

async function run(argv: string[], env: Record<string, string> = {}) {
  const { io, out, err } = captureIO({ HOME: empty, ...env }, { cwd: empty });
  const status = await main(argv, cli, io);
  return { status, out, err };
}

describe('a secret pasted as an argument is never printed back', () => {
  const pasted = 'biam_key_FAKEFAKEFAKEFAKEFAKEFAKE';

  it('as a command word: INVALID_COMMAND without the word or a suggestion', async () => {
    const result = await run([pasted]);
    expect(result.status).toBe(2);
    expect(result.err).toEqual([
      'INVALID_COMMAND: unknown command: word 1 looks like a credential, not a command (not shown)',
      'hint: Run "better-compute help" for every command; tokens are read from standard input or BETTER_COMPUTE_TOKEN, never from an argument.',
    ]);
    const after = await run(['auth', pasted]);
    expect(after.status).toBe(2);
    expect(after.err[0]).toBe(
      'INVALID_COMMAND: unknown command: word 2 (after "auth") looks like a credential, not a command (not shown)',
    );
    expect([...result.err, ...after.err].join('\n')).not.toContain('FAKE');
  });

  it('ordinary typos still get their suggestion', async () => {
    const result = await run(['migrat']);
    expect(result.err[0]).toBe('INVALID_COMMAND: unknown command "migrat"; did you mean "migrate"?');
  });
});

describe('help COMMAND with extra words', () => {
  it('refuses the extra words, never suggesting the same command', async () => {
    const result = await run(['help', 'migrate', 'extra']);
    expect(result.status).toBe(2);
    expect(result.out).toEqual([]);
    expect(result.err).toEqual([
      'INVALID_COMMAND: "help migrate" takes one command; "extra" is not part of it',
      'hint: Run "better-compute help migrate".',
    ]);
    const sub = await run(['help', 'auth', 'login', 'extra']);
    expect(sub.err[0]).toBe(
      'INVALID_COMMAND: "help auth login" takes one command; "extra" is not part of it',
    );
    const itself = await run(['help', 'help', 'extra']);
    expect(itself.err[0]).toBe('INVALID_COMMAND: "help help" takes one command; "extra" is not part of it');
  });
});

describe('a flag after a group name', () => {
  it('says the group needs one of its commands, and points at the group listing', async () => {
    const result = await run(['auth', '--bogus']);
    expect(result.status).toBe(2);
    expect(result.err).toEqual([
      'INVALID_COMMAND: "auth" is a group of commands, not a command: name one of login, logout, status before --bogus',
      'hint: Run "better-compute auth" for the commands under auth.',
    ]);
  });

  it('auth --help lists the group, as better-compute auth does', async () => {
    const plain = await run(['auth']);
    const help = await run(['auth', '--help']);
    expect(help.status).toBe(0);
    expect(help.out).toEqual(plain.out);
  });
});

describe('did you mean', () => {
  it('catches a difference of case in a flag', async () => {
    const result = await run(['doctor', '--STRICT']);
    expect(result.status).toBe(2);
    expect(result.err).toEqual([
      'INVALID_ARGUMENT: unknown flag --STRICT for "doctor"; did you mean --strict?',
      'hint: Run "better-compute help doctor" for its flags.',
    ]);
  });
});

describe('the CONFIG_NOT_FOUND hint', () => {
  it('does not suggest --url to a command that does not take it', async () => {
    const result = await run(['migrate']);
    expect(result.status).toBe(1);
    expect(result.err).toEqual([
      'CONFIG_NOT_FOUND: no configuration found',
      'hint: Run "better-compute init", pass --config, or set BETTER_COMPUTE_DATABASE_URL.',
    ]);
  });

  it('still suggests --url to a token command run in process', async () => {
    const result = await run(['api', 'system.version']);
    expect(result.status).toBe(1);
    expect(result.err[0]).toBe('CONFIG_NOT_FOUND: no configuration found');
    expect(result.err[1]).toBe(
      'hint: Run "better-compute init", pass --config, or set BETTER_COMPUTE_DATABASE_URL. Or pass --url (BETTER_COMPUTE_URL) to call a running server.',
    );
  });
});

describe('INTERNAL under BETTER_COMPUTE_DEBUG', () => {
  it('without debug, the hint says to turn it on', async () => {
    const result = await run(['boom']);
    expect(result.status).toBe(1);
    expect(result.err).toEqual([
      'INTERNAL: kaboom',
      'hint: Run again with BETTER_COMPUTE_DEBUG=1 to see the stack trace.',
    ]);
  });

  it('with debug on, the hint points at the stack below instead of repeating the advice', async () => {
    const result = await run(['boom'], { BETTER_COMPUTE_DEBUG: '1' });
    expect(result.status).toBe(1);
    expect(result.err.slice(0, 2)).toEqual([
      'INTERNAL: kaboom',
      'hint: The stack trace below shows where it failed; include it (and the request id, if one is printed) when you report the problem.',
    ]);
    expect(result.err[2]).toMatch(/^ComputeError: kaboom\n\s+at /);
  });
});

describe('the message and hint lines', () => {
  it('stay one line each when the error carries line breaks', () => {
    const lines: string[] = [];
    printFailure(
      new ComputeError('NOT_FOUND', 'first\nsecond\r\nthird', {
        hint: 'do \u001b]0;pwn\u0007 this\nsecond line',
      }),
      { out: (line) => lines.push(line), env: {} },
    );
    expect(lines).toEqual(['NOT_FOUND: first second third', 'hint: do  ]0;pwn  this second line']);
  });
});
