/**
 * Issue 41: the command after `--` of `sandbox exec` and `ssh-cert --connect` reaches the remote
 * side word for word. OpenSSH sends one string that sshd runs as `$SHELL -c STRING`, so each word
 * is single-quoted (remote-argv.ts); here every quoted vector is run through the real shells of this
 * machine, as sshd would, and its words read back byte for byte. Then both commands through
 * `runCli`'s own path (the in-process CLI, a fake server, a spawn that plays sshd's part), and
 * `sandbox exec --minutes`: 1 to 15, default 10, sent as the grant's lifetime.
 */
import { spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  methods,
  SANDBOX_EXEC_DEFAULT_MINUTES,
  SANDBOX_EXEC_MAX_MINUTES,
  SANDBOX_EXEC_MIN_MINUTES,
} from '@better-compute/core/methods';
import { builtinCommands, createCli, main, runCli, type CliIO } from '../src/cli/index.js';
import { quoteShellWord, remoteCommandLine } from '../src/cli/remote-argv.js';
import { captureIO, fakeServer, type FakeServer, scratchDirectory } from './cli-support.js';

/** The shells a remote account may have, those this machine has (sh once, whichever it is). */
const SHELLS = [
  ...new Map(
    ['sh', 'bash', 'dash', 'zsh', 'ksh', 'mksh'].flatMap((shell) => {
      const found = spawnSync('sh', ['-c', `command -v ${shell}`], { encoding: 'utf8' });
      return found.status === 0 ? [[realpathSync(found.stdout.trim()), shell] as const] : [];
    }),
  ).values(),
];

/** Runs a remote command line as sshd does (`SHELL -c LINE`): the exit status and stdout's bytes. */
function asSshd(shell: string, line: string): { status: number | null; stdout: Buffer; stderr: string } {
  const result = spawnSync(shell, ['-c', line], {
    env: { PATH: process.env.PATH ?? '', HOME: '/nonexistent-home' },
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr.toString() };
}

/** The words a vector arrives as, read back with printf '%s\0' on the far side. */
function arrived(shell: string, vector: readonly string[]): Buffer[] {
  const { status, stdout, stderr } = asSshd(shell, remoteCommandLine(['printf', '%s\\0', ...vector])!);
  expect(status, stderr).toBe(0);
  const words: Buffer[] = [];
  let start = 0;
  for (let i = 0; i < stdout.length; i++)
    if (stdout[i] === 0) {
      words.push(stdout.subarray(start, i));
      start = i + 1;
    }
  expect(start, 'the output ends with a NUL').toBe(stdout.length);
  return words;
}

const controls = Array.from({ length: 31 }, (_, i) => String.fromCharCode(i + 1)).join('') + '\u007f';

const VECTORS: [string, string[]][] = [
  ['a script for sh -c', ['sh', '-c', 'exit 7']],
  ['words with spaces and a variable that must not expand', ['<%s>', 'a b', '$HOME']],
  ['single quotes, alone, doubled and inside words', ["'", "''", "it's", "'quoted'", "a'b'c"]],
  ['double quotes and backslashes', ['"', '\\', '\\\\"', 'C:\\path\\"x"', '\\n']],
  ['a newline, a tab and a carriage return inside one word', ['line 1\nline 2', 'tab\there', 'cr\rlf\n']],
  ['leading dashes, read by no one as options', ['-n', '--', '-oProxyCommand=touch /tmp/x', '-e', '--help']],
  ['the empty word, and a word of spaces', ['', ' ', '  two  ']],
  [
    'command substitution, globbing, braces, tildes and history',
    ['$(id)', '`id`', '*', '?', '[a]', '{a,b}', '~', '~root', '!!', '!$'],
  ],
  ['separators and redirections', [';', '&&', '||', '|', '&', '>', '<', '>>', '2>&1', '#comment', 'a;b']],
  ['every control character but NUL', [controls, `x${controls}y`]],
  ['text beyond ASCII', ['é', 'ü∂ƒ', '日本語', '🙂 emoji', '\u00a0nbsp', '\u0085', 'ÿ\u00ff\u0100']],
  [
    'every printable ASCII character in one word',
    [Array.from({ length: 95 }, (_, i) => String.fromCharCode(i + 32)).join('')],
  ],
];

/** A random word of non-NUL code points, surrogates left out: what an argv of valid text can hold. */
function randomWord(): string {
  const length = randomInt(0, 24);
  let word = '';
  while (word.length < length) {
    const pick = randomInt(0, 10);
    const code =
      pick < 6
        ? randomInt(1, 0x80)
        : pick < 8
          ? randomInt(0x80, 0x800)
          : pick < 9
            ? randomInt(0x800, 0xd800)
            : randomInt(0x10000, 0x110000);
    word += String.fromCodePoint(code);
  }
  return word;
}

describe('remoteCommandLine: each word single-quoted for the remote POSIX shell', () => {
  it("quotes a word, writing a quote as '\\''", () => {
    expect(quoteShellWord("it's")).toBe(`'it'\\''s'`);
    expect(remoteCommandLine(['sh', '-c', 'exit 7'])).toBe(`'sh' '-c' 'exit 7'`);
  });

  it('no words is no command: ssh opens a login shell', () => {
    expect(remoteCommandLine([])).toBeUndefined();
  });

  it.each(SHELLS)(
    'under %s, `-- sh -c "exit 7"` exits 7 and the printf vector prints <a b><$HOME>',
    (shell) => {
      expect(asSshd(shell, remoteCommandLine(['sh', '-c', 'exit 7'])!).status).toBe(7);
      const printed = asSshd(shell, remoteCommandLine(['printf', '<%s>', 'a b', '$HOME'])!);
      expect(printed.status).toBe(0);
      expect(printed.stdout.toString()).toBe('<a b><$HOME>');
    },
  );

  for (const shell of SHELLS)
    it.each(VECTORS)(`under ${shell}, %s arrive whole, byte for byte`, (_, vector) => {
      expect(arrived(shell, vector)).toEqual(vector.map((word) => Buffer.from(word, 'utf8')));
    });

  it.each(SHELLS)('under %s, 100 random vectors of arbitrary text arrive whole', (shell) => {
    for (let round = 0; round < 100; round++) {
      const vector = Array.from({ length: randomInt(1, 6) }, randomWord);
      expect(arrived(shell, vector), JSON.stringify(vector)).toEqual(
        vector.map((word) => Buffer.from(word, 'utf8')),
      );
    }
  });

  it('refuses a word holding NUL, or a lone surrogate, naming its position and never its text', () => {
    for (const [vector, what, index] of [
      [['echo', 'sec\0ret-value'], 'a NUL byte', 2],
      [['\0'], 'a NUL byte', 1],
      [['echo', 'ok', 'half \ud800 of a pair'], 'a lone UTF-16 surrogate', 3],
    ] as const) {
      let thrown: unknown;
      try {
        remoteCommandLine(vector);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: `argument ${index} after -- holds ${what}, which cannot reach the remote command intact`,
        details: { field: 'command', index },
      });
      expect(JSON.stringify(thrown)).not.toContain('ret-value');
    }
  });
});

// ---------------------------------------------------------------------------------------------
// The commands, through runCli's path: a fake server grants, and a spawn plays sshd's part.

const scratch = scratchDirectory('.bc-remote-argv-');
const key = join(scratch, 'id_ed25519');
const SANDBOX = 'sbx_01k5w000000000000000000000';
const NODE = 'node_01k5w000000000000000000000';
let server: FakeServer;
let hostCa = '';

/** A real OpenSSH user certificate for the test key, from a CA of the test's own. */
function certificate(principal: string): string {
  const cert = `${key}-cert.pub`;
  if (existsSync(cert)) spawnSync('rm', ['-f', cert]);
  const signed = spawnSync('ssh-keygen', [
    '-q',
    '-s',
    join(scratch, 'ca'),
    '-I',
    'test',
    '-n',
    principal,
    '-V',
    '+10m',
    `${key}.pub`,
  ]);
  expect(signed.status, signed.stderr.toString()).toBe(0);
  return readFileSync(cert, 'utf8').trim();
}

/** What a run did: its exit status, stderr, and the ssh argument vectors it spawned. */
interface Ran {
  code: number;
  err: string;
  spawned: { command: string; args: string[] }[];
  remote: { status: number | null; stdout: string }[];
}

/**
 * Runs the CLI in process as a program would, with a spawn that stands for ssh and the remote
 * sshd: it records the arguments and runs the remote command line (ssh's last argument after the
 * host) with `sh -c`, exactly what sshd does with it, and answers that status.
 */
async function run(argv: string[]): Promise<Ran> {
  const spawned: Ran['spawned'] = [];
  const remote: Ran['remote'] = [];
  const spawn: CliIO['spawn'] = async (command, args) => {
    spawned.push({ command, args });
    const host = args.indexOf('--');
    const line = args.slice(host + 2);
    expect(line.length, 'ssh gets the command as one argument').toBeLessThanOrEqual(1);
    if (line.length === 0) return 0;
    const result = asSshd('sh', line[0]!);
    remote.push({ status: result.status, stdout: result.stdout.toString() });
    return result.status ?? 255;
  };
  const { io, err } = captureIO(
    {
      HOME: scratch,
      BETTER_COMPUTE_URL: server.url,
      BETTER_COMPUTE_TOKEN: 'biam_test_token',
      BETTER_COMPUTE_TENANT: 'acme',
    },
    { cwd: scratch, spawn },
  );
  const code = await main(argv, createCli({ projectCommands: false }), io);
  return { code, err: err.join('\n'), spawned, remote };
}

beforeAll(async () => {
  expect(spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', key]).status).toBe(0);
  expect(spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(scratch, 'ca')]).status).toBe(
    0,
  );
  hostCa = readFileSync(join(scratch, 'ca.pub'), 'utf8').trim();
  server = await fakeServer({
    '/api/compute/sandboxes/exec': (call) => ({
      data: {
        sandboxId: call.body.sandboxId,
        ticket: 'bct1.test',
        ticketExpiresAt: new Date(Date.now() + 60_000).toISOString(),
        certificate: certificate(SANDBOX),
        certificateExpiresAt: new Date(Date.now() + 600_000).toISOString(),
        account: 'root',
        hostPrincipal: SANDBOX,
        hostCertified: true,
        hostCaPublicKey: hostCa,
      },
    }),
    '/api/compute/nodes/issueSshCert': (call) => ({
      data: {
        id: 'ssh_01k5w000000000000000000000',
        nodeId: call.body.nodeId,
        account: 'root',
        principal: `root@${NODE}`,
        certificate: certificate(`root@${NODE}`),
        caPublicKey: hostCa,
      },
    }),
  });
});

afterAll(async () => {
  await server?.close();
});

describe('sandbox exec, through runCli', () => {
  const exec = (...rest: string[]) => ['sandbox', 'exec', SANDBOX, '--key', key, ...rest];

  it('hands ssh one remote command line that runs the vector given: exit 7, <a b><$HOME>', async () => {
    const seven = await run(exec('--', 'sh', '-c', 'exit 7'));
    expect(seven.code).toBe(7);
    expect(seven.err).toContain('REMOTE_EXIT: ssh exited with status 7');
    expect(seven.spawned[0]!.args.slice(-3)).toEqual(['--', '127.0.0.1', `'sh' '-c' 'exit 7'`]);
    const printf = await run(exec('--', 'printf', '<%s>', 'a b', '$HOME'));
    expect(printf.code, printf.err).toBe(0);
    expect(printf.remote).toEqual([{ status: 0, stdout: '<a b><$HOME>' }]);
    const odd = await run(exec('--', 'printf', '[%s]', 'line 1\nline 2', "it's", '-n', '--', ''));
    expect(odd.remote).toEqual([{ status: 0, stdout: "[line 1\nline 2][it's][-n][--][]" }]);
  });

  it('without a command, ssh gets none after the host: a login shell', async () => {
    const shell = await run(exec());
    expect(shell.code, shell.err).toBe(0);
    expect(shell.spawned[0]!.args.slice(-2)).toEqual(['--', '127.0.0.1']);
  });

  it('sends --minutes as the lifetime: 10 unless given, 1 to 15', async () => {
    server.calls.length = 0;
    await run(exec('--', 'true'));
    await run(exec('--minutes', '15', '--', 'true'));
    await run(exec('--minutes', '1', '--', 'true'));
    expect(server.calls.map((call) => call.body.minutes)).toEqual([10, 15, 1]);
  });

  it.each([['16'], ['0'], ['2.5'], ['ten']])(
    'refuses --minutes %s before anything is sent (exit 2)',
    async (minutes) => {
      server.calls.length = 0;
      const refused = await run(exec('--minutes', minutes, '--', 'true'));
      expect(refused.code).toBe(2);
      expect(refused.err).toMatch(/^INVALID_ARGUMENT: --minutes must be /);
      expect(refused.err).toContain('better-compute help sandbox exec');
      expect(server.calls).toEqual([]);
      expect(refused.spawned).toEqual([]);
    },
  );

  it('refuses an argument holding NUL before a grant is asked for', async () => {
    server.calls.length = 0;
    const thrown = await runCli(exec('--', 'echo', 'a\0b'), {
      ...captureIO(
        { HOME: scratch, BETTER_COMPUTE_URL: server.url, BETTER_COMPUTE_TOKEN: 'biam_test_token' },
        { cwd: scratch, spawn: async () => 0 },
      ).io,
    }).catch((error: unknown) => error);
    expect(thrown).toMatchObject({ code: 'INVALID_ARGUMENT', details: { field: 'command', index: 2 } });
    expect(server.calls).toEqual([]);
  });

  it('help sandbox exec shows --minutes, 1 to 15, default 10', async () => {
    const { io, out } = captureIO();
    expect(await main(['help', 'sandbox', 'exec'], createCli({ projectCommands: false }), io)).toBe(0);
    const help = out.join('\n');
    expect(help).toMatch(
      /--minutes N\s+How long the certificate is valid, in minutes \(never past your session\) \(default: 10\)/,
    );
  });

  it('its flag and the method hold the same bounds (SANDBOX_EXEC_*_MINUTES)', () => {
    const flag = builtinCommands.find((command) => command.name === 'sandbox exec')!.flags!.minutes as {
      min: number;
      max: number;
      default: number;
    };
    expect([flag.min, flag.max, flag.default]).toEqual([
      SANDBOX_EXEC_MIN_MINUTES,
      SANDBOX_EXEC_MAX_MINUTES,
      SANDBOX_EXEC_DEFAULT_MINUTES,
    ]);
    const input = methods['sandboxes.exec'].input;
    const base = { tenantId: 'acme', sandboxId: SANDBOX, publicKey: 'ssh-ed25519 AAAA' };
    expect(input.parse(base)).toMatchObject({ minutes: 10 });
    expect(input.safeParse({ ...base, minutes: 15 }).success).toBe(true);
    expect(input.safeParse({ ...base, minutes: 16 }).success).toBe(false);
    expect(input.safeParse({ ...base, minutes: 0 }).success).toBe(false);
    expect(input.safeParse({ ...base, minutes: 1.5 }).success).toBe(false);
  });
});

describe('ssh-cert --connect, through runCli', () => {
  const connect = (...rest: string[]) => [
    'ssh-cert',
    '--node',
    NODE,
    '--key',
    `${key}.pub`,
    '--connect',
    '127.0.0.1',
    ...rest,
  ];

  it('hands ssh one remote command line that runs the vector given', async () => {
    const seven = await run(connect('--', 'sh', '-c', 'exit 7'));
    expect(seven.code).toBe(7);
    expect(seven.spawned[0]!.args.slice(-3)).toEqual(['--', '127.0.0.1', `'sh' '-c' 'exit 7'`]);
    const printf = await run(connect('--', 'printf', '<%s>', 'a b', '$HOME', "it's\n"));
    expect(printf.remote).toEqual([{ status: 0, stdout: "<a b><$HOME><it's\n>" }]);
    const shell = await run(connect());
    expect(shell.code, shell.err).toBe(0);
    expect(shell.spawned[0]!.args.slice(-2)).toEqual(['--', '127.0.0.1']);
  });

  it('refuses an argument holding NUL before a certificate is issued', async () => {
    server.calls.length = 0;
    const refused = await run(connect('--', 'id', '\0'));
    expect(refused.code).toBe(2);
    expect(refused.err).toMatch(/^INVALID_ARGUMENT: argument 2 after -- holds a NUL byte/);
    expect(server.calls).toEqual([]);
  });
});
