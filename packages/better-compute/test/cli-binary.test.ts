/**
 * What a person types, against the real binary: `node packages/better-compute/bin/better-compute.cjs …`
 * after `node scripts/build.mjs` (run here when the build is older than the sources).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..', '..');
const bin = join(root, 'packages', 'better-compute', 'bin', 'better-compute.cjs');
const built = join(root, 'packages', 'better-compute', 'dist', 'cli', 'bin.cjs');
// A directory without a configuration, and an environment without credentials.
const cwd = mkdtempSync(join(tmpdir(), 'bc-bin-'));
const env = { PATH: process.env.PATH ?? '', HOME: cwd, BETTER_IAM_HOME: join(cwd, 'iam') };

function newest(dir: string): number {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

function run(args: string[], extraEnv: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, [bin, ...args], {
    cwd,
    env: { ...env, ...extraEnv },
    encoding: 'utf8',
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

beforeAll(() => {
  const sources = Math.max(
    ...['core', 'client', 'better-compute', 'db', 'events', 'iam'].map((p) =>
      newest(join(root, 'packages', p, 'src')),
    ),
    statSync(join(root, 'scripts', 'build.mjs')).mtimeMs,
  );
  if (!existsSync(built) || statSync(built).mtimeMs < sources) {
    execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs')], { cwd: root, stdio: 'inherit' });
  }
}, 120_000);

describe('the better-compute binary', () => {
  it('version prints the version and exits 0', () => {
    expect(run(['version'])).toEqual({ status: 0, stdout: 'better-compute 0.1.0\n', stderr: '' });
    expect(run(['--version']).stdout).toBe('better-compute 0.1.0\n');
  });

  it('help lists the commands by group', () => {
    const { status, stdout, stderr } = run(['help']);
    expect(status).toBe(0);
    expect(stderr).toBe('');
    expect(stdout).toMatch(
      /^better-compute 0\.1\.0: the control plane for GPU and VPS fleets\n\nUsage: better-compute COMMAND \[flags\]\n/,
    );
    expect(stdout).toContain('\nAuth: Credentials for token commands\n  auth login   Save a token');
    expect(stdout).toContain('\nAPI: Call any method\n  api  Call any method');
    expect(stdout).toContain('\nOperate: Run and maintain a deployment\n  migrate');
    expect(run([]).stdout).toBe(stdout);
  });

  it('help COMMAND shows the flags, defaults, choices and examples', () => {
    const { status, stdout } = run(['help', 'serve']);
    expect(status).toBe(0);
    expect(stdout).toContain('Usage: better-compute serve [flags]');
    expect(stdout).toMatch(/--port NUMBER\s+The port to listen on \(default: 8080\)/);
    expect(stdout).toMatch(
      /--roles api\|controllers\|sinks\|gateway\s+What this replica runs \(repeatable, or comma-separated; default: api,controllers,sinks,gateway\)/,
    );
    expect(stdout).toContain('Examples:\n  better-compute serve\n');
    expect(run(['serve', '--help']).stdout).toBe(stdout);
  });

  it('help --json prints the whole manifest', () => {
    const { status, stdout } = run(['help', '--json']);
    expect(status).toBe(0);
    const manifest = JSON.parse(stdout);
    expect(manifest).toMatchObject({ program: 'better-compute', version: '0.1.0' });
    const names = manifest.commands.map((c: { name: string }) => c.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'help',
        'version',
        'completion',
        'init',
        'migrate',
        'doctor',
        'serve',
        'dev',
        'auth login',
        'auth status',
        'auth logout',
        'api',
      ]),
    );
    const doctor = manifest.commands.find((c: { name: string }) => c.name === 'doctor');
    expect(doctor).toMatchObject({ group: 'Operate', target: 'config', project: false });
    expect(doctor.flags.find((f: { name: string }) => f.name === 'strict')).toEqual({
      name: 'strict',
      type: 'boolean',
      description: 'Fail with DOCTOR_FINDINGS on any warning or error',
      required: false,
      repeated: false,
      shared: false,
    });
  });

  it('an unknown command exits 2 with a did-you-mean', () => {
    expect(run(['hlep'])).toEqual({
      status: 2,
      stdout: '',
      stderr:
        'INVALID_COMMAND: unknown command "hlep"; did you mean "help"?\nhint: Run "better-compute help" for every command.\n',
    });
    expect(run(['auth', 'lgoin']).stderr).toMatch(
      /^INVALID_COMMAND: unknown command "auth lgoin"; did you mean "auth login"\?\n/,
    );
  });

  it('an unknown flag exits 2 with a did-you-mean', () => {
    expect(run(['doctor', '--strcit'])).toEqual({
      status: 2,
      stdout: '',
      stderr:
        'INVALID_ARGUMENT: unknown flag --strcit for "doctor"; did you mean --strict?\nhint: Run "better-compute help doctor" for its flags.\n',
    });
  });

  it('completion prints a script for bash, zsh and fish, and refuses other shells', () => {
    expect(run(['completion', 'bash']).stdout).toContain(
      'complete -o default -F _better_compute better-compute',
    );
    expect(run(['completion', 'zsh']).stdout).toContain('bashcompinit');
    expect(run(['completion', 'fish']).stdout).toContain(
      "complete -c better-compute -n '__better_compute_at' -a 'help'",
    );
    expect(run(['completion', 'tcsh'])).toMatchObject({
      status: 2,
      stderr: expect.stringMatching(/^INVALID_ARGUMENT: completion takes bash, zsh or fish/),
    });
  });

  it('a token command without a credential stops with MISSING_ENV, exit 1', () => {
    const { status, stderr } = run(['api', 'system.whoami', '--url', 'http://127.0.0.1:9']);
    expect(status).toBe(1);
    expect(stderr).toMatch(/^MISSING_ENV: system\.whoami needs a credential/);
  });

  it('a config command without a configuration stops with CONFIG_NOT_FOUND', () => {
    const { status, stderr } = run(['migrate']);
    expect(status).toBe(1);
    expect(stderr).toMatch(/^CONFIG_NOT_FOUND: no configuration found\nhint: /);
  });

  it('BETTER_COMPUTE_DEBUG=1 prints the stack trace of a failure', () => {
    expect(run(['migrate'], { BETTER_COMPUTE_DEBUG: '1' }).stderr).toMatch(
      /\nComputeError: no configuration found\n\s+at loadConfig /,
    );
  });

  it('the entry prints the help pages the CLI bundle prints, byte for byte', () => {
    const program = join(root, 'packages', 'better-compute', 'dist', 'cli', 'program.cjs');
    const viaProgram = (args: string[]) =>
      spawnSync(
        process.execPath,
        [
          '-e',
          `require(${JSON.stringify(program)}).main(process.argv.slice(1)).then((s) => { process.exitCode = s; })`,
          ...args,
        ],
        { cwd, env, encoding: 'utf8' },
      );
    for (const args of [
      [],
      ['help'],
      ['help', '--json'],
      ['help', 'auth'],
      ['help', 'release'],
      ['serve', '--help'],
    ]) {
      const fast = run(args);
      const slow = viaProgram(args);
      expect({ args, status: fast.status, stdout: fast.stdout, stderr: fast.stderr }).toEqual({
        args,
        status: slow.status,
        stdout: slow.stdout,
        stderr: slow.stderr,
      });
    }
    // The built manifest is the built CLI's.
    const dist = join(root, 'packages', 'better-compute', 'dist', 'cli');
    expect(JSON.parse(readFileSync(join(dist, 'help.json'), 'utf8'))).toEqual(
      JSON.parse(viaProgram(['help', '--json']).stdout),
    );
  });

  it("help lists a configuration's project commands, through the CLI", () => {
    const dir = mkdtempSync(join(tmpdir(), 'bc-bin-config-'));
    writeFileSync(
      join(dir, 'better-compute.config.mjs'),
      `export default { database: 'pglite:memory' };
export const commands = [{ name: 'hello', summary: 'Say hello from the project', target: 'none', run: () => 'hi' }];
`,
    );
    const result = spawnSync(process.execPath, [bin, 'help'], { cwd: dir, env, encoding: 'utf8' });
    expect(result.stdout).toContain('Say hello from the project');
  });

  it('version and help load neither zod, kysely, pg, PGlite nor the server', () => {
    const log = join(cwd, 'modules.log');
    // The start-up bundle is CommonJS: log every file `require` and `import()` load.
    const preload = join(cwd, 'log-modules.cjs');
    writeFileSync(
      preload,
      `const Module = require('node:module');
const { appendFileSync } = require('node:fs');
const resolve = Module._resolveFilename;
Module._resolveFilename = function (...args) {
  const file = resolve.apply(this, args);
  appendFileSync(process.env.BC_MODULE_LOG, file + '\\n');
  return file;
};
Module.register('data:text/javascript,' + encodeURIComponent(\`
import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(process.env.BC_MODULE_LOG, result.url + '\\\\n');
  return result;
}\`));
`,
    );
    for (const command of [['version'], ['help'], ['help', 'api'], ['completion', 'zsh'], ['auth']]) {
      writeFileSync(log, '');
      const result = spawnSync(process.execPath, ['--require', preload, bin, ...command], {
        cwd,
        env: { ...env, BC_MODULE_LOG: log },
        encoding: 'utf8',
      });
      expect(result.stderr).toBe('');
      expect(result.status).toBe(0);
      const loaded = readFileSync(log, 'utf8');
      expect(loaded).toContain('better-compute/dist/cli/bin.cjs');
      // `version` and the help pages answer from the small entry alone (help from the manifest the
      // build writes); the CLI's bundle is parsed for the rest.
      if (command[0] !== 'auth') expect(loaded).not.toContain('program.cjs');
      else expect(loaded).toContain('better-compute/dist/cli/program.cjs');
      // `version`, and a line that is no help page, parse not even the help pages' part.
      if (command[0] === 'version' || command[0] === 'auth') expect(loaded).not.toContain('help-fast.cjs');
      else expect(loaded).toContain('better-compute/dist/cli/help-fast.cjs');
      expect(loaded).not.toMatch(/node_modules\/(zod|kysely|pg|@electric-sql|esbuild|better-iam)\//);
      expect(loaded).not.toMatch(
        /@better-compute\/(db|client|events)|core\/dist\/methods|packages\/(db|client|iam)\//,
      );
    }
    // The log does see what a command does load: a remote call brings in the client.
    writeFileSync(log, '');
    spawnSync(
      process.execPath,
      ['--require', preload, bin, 'api', 'system.version', '--url', 'http://127.0.0.1:9'],
      {
        cwd,
        env: { ...env, BC_MODULE_LOG: log },
      },
    );
    expect(readFileSync(log, 'utf8')).toMatch(/packages\/client\/dist\//);
  });
});
