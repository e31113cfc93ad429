/**
 * The embedded IAM's "done when", with real processes only: `better-compute dev` serves on a free
 * port from a temporary directory; a person of tenant acme signs in with `better-iam`, enrolls and
 * confirms TOTP, signs in again with the code, and calls `better-compute api system.whoami` as that
 * saved session; then creates an API key, uses it, revokes it and is refused on the very next call;
 * and `better-compute auth login` saves a key in compute's own 0600 file. No secret reaches the
 * server's output after its startup banner, nor any error output.
 */
import { execFileSync, spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as OTPAuth from 'otpauth';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeBin, iamBin, root, startBin, type RunningServer } from './support.js';

interface Result {
  status: number | null;
  stdout: string;
  stderr: string;
}

interface DevAccount {
  tenantId: string;
  principalId: string;
  email: string;
  password: string;
  apiKey: string;
}

const work = mkdtempSync(join(tmpdir(), 'bc-iam-flow-'));
/** better-iam's profile store, where the person's session is saved. */
const iamHome = join(work, 'iam');
/** An empty better-iam store, so compute's own credentials file is the one that applies. */
const emptyIamHome = join(work, 'iam-empty');
const credentialsFile = join(work, 'compute', 'credentials.json');
/** What every client process gets: no BETTER_COMPUTE_TOKEN and nothing from the test's environment. */
const baseEnv = {
  HOME: work,
  BETTER_IAM_HOME: iamHome,
  BETTER_COMPUTE_CREDENTIALS: credentialsFile,
};

let server: RunningServer | undefined;
let startup = '';
let url = '';
let member: DevAccount;
const PERSISTENT_DEV_JSON = '{ "rootAdmin": { "note": "a persistent store\'s accounts" } }\n';
const errors: string[] = [];
const secrets: string[] = [];

function newest(dir: string): number {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

/** Runs a binary to completion without blocking the loop that collects the server's output. */
function run(bin: string, args: string[], env: Record<string, string> = {}, input = ''): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], {
      cwd: work,
      env: { PATH: process.env.PATH ?? '', ...baseEnv, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('error', reject);
    child.once('close', (status) => {
      clearTimeout(timer);
      errors.push(stderr);
      resolve({ status, stdout, stderr });
    });
    child.stdin.end(input);
  });
}

const iam = (args: string[], input = '', env: Record<string, string> = {}) => run(iamBin, args, env, input);
const compute = (args: string[], env: Record<string, string> = {}, input = '') =>
  run(computeBin, args, { BETTER_COMPUTE_URL: url, ...env }, input);
const json = (result: Result) => JSON.parse(result.stdout) as Record<string, unknown>;

beforeAll(async () => {
  // Build once, when a source is newer than the binaries (global setup normally did it already).
  const sources = Math.max(
    ...['core', 'client', 'better-compute', 'db', 'events', 'iam'].map((p) =>
      newest(join(root, 'packages', p, 'src')),
    ),
    statSync(join(root, 'scripts', 'build.mjs')).mtimeMs,
  );
  const built = [
    join(root, 'packages', 'better-compute', 'dist', 'cli', 'bin.cjs'),
    join(root, 'packages', 'iam', 'dist', 'cli', 'index.js'),
  ];
  if (built.some((file) => !existsSync(file) || statSync(file).mtimeMs < sources)) {
    execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs')], { cwd: root, stdio: 'inherit' });
  }
  mkdirSync(emptyIamHome);
  // A persistent store's credentials already there: dev --memory must leave them as they are (issue 15).
  mkdirSync(join(work, '.better-compute'), { recursive: true });
  writeFileSync(join(work, '.better-compute', 'dev.json'), PERSISTENT_DEV_JSON, { mode: 0o600 });
  // Port 0: the server picks a free port and prints the URL it listens on.
  server = await startBin(computeBin, ['dev', '--memory', '--port', '0'], {
    cwd: work,
    env: { HOME: work },
    ready: /\ntry: BETTER_COMPUTE_URL=\S+/,
    timeoutMs: 50_000,
  });
  startup = server.output();
  url = /better-compute dev: (http:\/\/127\.0\.0\.1:\d+)\/api\/compute\n/.exec(startup)![1]!;
  const dev = JSON.parse(readFileSync(join(work, '.better-compute', 'dev-memory.json'), 'utf8')) as {
    url: string;
    acmeMember: DevAccount;
  };
  expect(dev.url).toBe(url);
  member = dev.acmeMember;
  expect(member).toMatchObject({ tenantId: 'acme', email: 'member@acme.localhost' });
  secrets.push(member.password, member.apiKey);
}, 120_000);

afterAll(async () => {
  await server?.stop();
});

describe('a person signs in with TOTP, creates a key and uses it with better-compute', () => {
  let totp: OTPAuth.TOTP;
  let confirmedAt = 0;
  let key = '';
  let keyId = '';

  it('(a) better-iam login takes the password from stdin and saves a 0600 profile', async () => {
    const login = await iam(
      ['login', '--url', url, '--email', member.email, '--tenant', 'acme'],
      `${member.password}\n`,
    );
    expect(login.stderr).toBe('');
    expect(login.status).toBe(0);
    expect(json(login)).toMatchObject({
      profile: 'default',
      tenantId: 'acme',
      principalId: member.principalId,
      mfa: false,
    });
    const path = join(iamHome, 'profiles.json');
    expect(json(login).path).toBe(path);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(login.stdout).not.toContain('biam_ses_');
    const saved = JSON.parse(readFileSync(path, 'utf8')) as { profiles: { default: { token: string } } };
    secrets.push(saved.profiles.default.token);
  });

  it('(b) totp enroll prints the secret once; totp confirm reads the code from stdin', async () => {
    const enroll = await iam(['totp', 'enroll']);
    expect(enroll.status).toBe(0);
    const { secret, uri } = json(enroll) as { secret: string; uri: string };
    expect(uri).toMatch(/^otpauth:\/\/totp\//);
    expect(enroll.stderr).not.toContain(secret);
    secrets.push(secret);
    totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret) });
    confirmedAt = Date.now();
    const confirm = await iam(['totp', 'confirm'], `${totp.generate({ timestamp: confirmedAt })}\n`);
    expect(confirm.stderr).toBe('');
    expect(confirm.status).toBe(0);
    expect(json(confirm)).toMatchObject({ confirmed: true });
  });

  it('(c) once confirmed, login without --totp-stdin is refused, and with the code the session has mfa', async () => {
    const logout = await iam(['logout']);
    expect(json(logout)).toEqual({ profile: 'default', revoked: true });
    const without = await iam(
      ['login', '--url', url, '--email', member.email, '--tenant', 'acme'],
      `${member.password}\n`,
    );
    expect(without.status).toBe(1);
    expect(without.stdout).toBe('');
    expect(without.stderr).toMatch(/^UNAUTHENTICATED: a TOTP code is required\nhint: .*--totp-stdin/);
    // The confirming code's time step is spent (no replays): use the next step's, which the server
    // accepts within its one-step window.
    const code = totp.generate({ timestamp: confirmedAt + 30_000 });
    const login = await iam(
      ['login', '--url', url, '--email', member.email, '--tenant', 'acme', '--totp-stdin'],
      `${member.password}\n${code}\n`,
    );
    expect(login.stderr).toBe('');
    expect(login.status).toBe(0);
    expect(json(login)).toMatchObject({ principalId: member.principalId, mfa: true });
    const saved = JSON.parse(readFileSync(join(iamHome, 'profiles.json'), 'utf8')) as {
      profiles: { default: { token: string } };
    };
    secrets.push(saved.profiles.default.token);
    expect(statSync(join(iamHome, 'profiles.json')).mode & 0o777).toBe(0o600);
  });

  it('(d) better-compute uses the saved Better IAM session when there is no BETTER_COMPUTE_TOKEN', async () => {
    const whoami = await compute(['api', 'system.whoami']);
    expect(whoami.stderr).toBe('');
    expect(whoami.status).toBe(0);
    expect(json(whoami)).toMatchObject({
      principalId: member.principalId,
      tenantId: 'acme',
      credentialKind: 'session',
      mfa: true,
    });
    const status = await compute(['auth', 'status']);
    expect(json(status)).toMatchObject({ source: 'better-iam', profile: 'default' });
  });

  it('(e) a key from better-iam keys create works, and is refused on the very next call once revoked', async () => {
    const created = await iam(['keys', 'create', '--name', 'e2e']);
    expect(created.status).toBe(0);
    ({ key } = json(created) as { key: string });
    keyId = (json(created).apiKey as { id: string }).id;
    expect(key).toMatch(/^biam_key_/);
    secrets.push(key);
    const asKey = { BETTER_COMPUTE_TOKEN: key };
    const whoami = await compute(['api', 'system.whoami'], asKey);
    expect(whoami.status).toBe(0);
    expect(json(whoami)).toMatchObject({ principalId: member.principalId, credentialKind: 'api-key' });
    const listed = await iam(['keys', 'list']);
    expect(listed.stdout).toContain(keyId);
    expect(listed.stdout).not.toContain(key);
    const revoke = await iam(['keys', 'revoke', keyId]);
    expect(revoke.stderr).toBe('');
    expect(revoke.status).toBe(0);
    const refused = await compute(['api', 'system.whoami'], asKey);
    expect(refused.status).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toMatch(/^UNAUTHENTICATED: /);
  });

  it('(g) better-compute auth login saves a key from stdin in a 0600 file; auth status never shows it', async () => {
    const own = { BETTER_IAM_HOME: emptyIamHome };
    const login = await compute(['auth', 'login', '--url', url], own, `${member.apiKey}\n`);
    expect(login.stderr).not.toContain(member.apiKey);
    expect(login.status).toBe(0);
    expect(login.stdout).not.toContain(member.apiKey);
    expect(statSync(credentialsFile).mode & 0o777).toBe(0o600);
    const status = await compute(['auth', 'status'], own);
    expect(status.status).toBe(0);
    expect(json(status)).toMatchObject({
      source: 'profile',
      profile: 'default',
      path: credentialsFile,
      target: url,
    });
    expect(status.stdout).not.toContain(member.apiKey);
    expect(status.stdout).not.toContain('biam_');
    const whoami = await compute(['api', 'system.whoami'], own);
    expect(json(whoami)).toMatchObject({ principalId: member.principalId, credentialKind: 'api-key' });
  });

  it('better-compute iam setup prints the three example policies', async () => {
    const setup = await run(computeBin, ['iam', 'setup', '--query', 'policies[].name']);
    expect(setup).toEqual({ status: 0, stdout: 'gpu-tenant\noperator\nci-job\n', stderr: '' });
  });

  it('(f) no password, key, session token or TOTP secret reached the server output, nor any error', async () => {
    expect(secrets.length).toBe(6);
    const output = server!.output();
    for (const secret of secrets) {
      expect(output).not.toContain(secret);
      for (const stderr of errors) expect(stderr).not.toContain(secret);
    }
    // The startup banner names the dev accounts; their password and key are only in dev-memory.json.
    expect(startup).toContain(member.email);
    expect(startup).toContain('.better-compute/dev-memory.json');
  });

  it('dev --memory writes its accounts beside a persistent store’s dev.json, never over it', () => {
    expect(readFileSync(join(work, '.better-compute', 'dev.json'), 'utf8')).toBe(PERSISTENT_DEV_JSON);
    expect(statSync(join(work, '.better-compute', 'dev-memory.json')).mode & 0o777).toBe(0o600);
  });

  it('the server stops on SIGTERM and exits 0', async () => {
    const stopping = server!;
    server = undefined;
    expect(await stopping.stop()).toBe(0);
  });
});
