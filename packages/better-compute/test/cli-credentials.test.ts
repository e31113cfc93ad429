import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  credentialsPath,
  readCredentials,
  resolveCredential,
  writeCredentials,
} from '../src/cli/credentials.js';
import { createCli, main } from '../src/cli/index.js';
import { captureIO, fakeServer, WHOAMI, type FakeServer } from './cli-support.js';

let home: string;
let env: Record<string, string>;
const file = () => join(home, '.config', 'better-compute', 'credentials.json');

function saveIamSession(session: { url: string; token: string; expiresAt: string | null }) {
  mkdirSync(join(home, 'iam'), { recursive: true });
  writeFileSync(
    join(home, 'iam', 'profiles.json'),
    JSON.stringify({
      current: 'default',
      profiles: { default: { ...session, tenantId: 'acme', principalId: 'usr_x' } },
    }),
  );
}

async function saveProfiles(
  profiles: Record<string, { url: string | null; token: string; tenantId?: string }>,
  current: string | null = null,
) {
  await writeCredentials(file(), {
    version: 1,
    current,
    profiles: Object.fromEntries(
      Object.entries(profiles).map(([name, p]) => [name, { tenantId: null, savedAt: 'now', ...p }]),
    ),
  });
}

beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), 'bc-cred-'));
  env = { HOME: home, BETTER_IAM_HOME: join(home, 'iam') };
});

describe('where the credentials file is', () => {
  it.each([
    [{ BETTER_COMPUTE_CREDENTIALS: '/x/creds.json', HOME: '/home/a' }, 'linux', '/x/creds.json'],
    [
      { APPDATA: 'C:\\Users\\a\\AppData\\Roaming', HOME: '/home/a' },
      'win32',
      'C:\\Users\\a\\AppData\\Roaming\\better-compute\\credentials.json',
    ],
    [{ XDG_CONFIG_HOME: '/xdg', HOME: '/home/a' }, 'linux', '/xdg/better-compute/credentials.json'],
    [{ HOME: '/home/a' }, 'darwin', '/home/a/.config/better-compute/credentials.json'],
  ])('%j on %s → %s', (given, platform, path) => {
    expect(credentialsPath(given, platform)).toBe(path);
  });

  it('is MISSING_ENV when the environment names no place', () => {
    expect(() => credentialsPath({}, 'linux')).toThrow(expect.objectContaining({ code: 'MISSING_ENV' }));
  });

  it('is written atomically with mode 0600 in a 0700 directory, leaving no temporary file', async () => {
    await saveProfiles({ default: { url: null, token: 't1' } }, 'default');
    await saveProfiles({ default: { url: null, token: 't2' } }, 'default');
    expect(statSync(file()).mode & 0o777).toBe(0o600);
    expect(statSync(join(home, '.config', 'better-compute')).mode & 0o777).toBe(0o700);
    expect(readdirSync(join(home, '.config', 'better-compute'))).toEqual(['credentials.json']);
    expect((await readCredentials(file())).profiles.default!.token).toBe('t2');
  });
});

describe('the order credentials are taken in', () => {
  const remote = { origin: 'https://compute.example.com' };

  it('BETTER_COMPUTE_TOKEN comes first', async () => {
    saveIamSession({ url: 'https://compute.example.com', token: 'iam', expiresAt: null });
    await saveProfiles({ default: { url: 'https://compute.example.com', token: 'saved' } }, 'default');
    const { credential } = await resolveCredential({
      env: { ...env, BETTER_COMPUTE_TOKEN: 'from-env' },
      target: remote,
    });
    expect(credential).toEqual({ source: 'env', token: 'from-env' });
  });

  it('then Better IAM’s saved session, unless it expired or is broken', async () => {
    await saveProfiles({ default: { url: 'https://compute.example.com', token: 'saved' } }, 'default');
    saveIamSession({
      url: 'https://compute.example.com',
      token: 'iam',
      expiresAt: '2999-01-01T00:00:00.000Z',
    });
    expect((await resolveCredential({ env, target: remote })).credential).toMatchObject({
      source: 'better-iam',
      token: 'iam',
      tenantId: 'acme',
    });
    saveIamSession({
      url: 'https://compute.example.com',
      token: 'iam',
      expiresAt: '2000-01-01T00:00:00.000Z',
    });
    const afterExpiry = await resolveCredential({ env, target: remote });
    expect(afterExpiry.credential).toMatchObject({ source: 'profile', token: 'saved' });
    // Passed over, and said so (auth status and MISSING_ENV show `skipped`).
    expect(afterExpiry.skipped).toEqual([
      `Better IAM's session (${join(home, 'iam', 'profiles.json')}) expired at 2000-01-01T00:00:00.000Z`,
    ]);
    writeFileSync(join(home, 'iam', 'profiles.json'), '{ broken');
    expect((await resolveCredential({ env, target: remote })).credential).toMatchObject({
      source: 'profile',
      token: 'saved',
    });
  });

  it('then the profile BETTER_COMPUTE_PROFILE (or --profile), else the current one, else default', async () => {
    await saveProfiles(
      { default: { url: null, token: 'd' }, ci: { url: null, token: 'c' }, dev: { url: null, token: 'v' } },
      'dev',
    );
    expect((await resolveCredential({ env, profile: 'ci', target: null })).credential).toMatchObject({
      profile: 'ci',
      token: 'c',
    });
    expect((await resolveCredential({ env, target: null })).credential).toMatchObject({
      profile: 'dev',
      token: 'v',
    });
    await saveProfiles({ default: { url: null, token: 'd' } }, null);
    expect((await resolveCredential({ env, target: null })).credential).toMatchObject({
      profile: 'default',
      token: 'd',
      path: file(),
    });
  });

  it('of Better IAM’s session and compute’s profile, the one saved last wins (issue 15: an auth login after a better-iam login is used)', async () => {
    const remote = { origin: 'https://compute.example.com' };
    const iamFile = join(home, 'iam', 'profiles.json');
    const minutesAgo = (m: number) => new Date(Date.now() - m * 60_000);
    saveIamSession({ url: 'https://compute.example.com', token: 'iam', expiresAt: null });
    utimesSync(iamFile, minutesAgo(10), minutesAgo(10));
    await writeCredentials(file(), {
      version: 1,
      current: 'default',
      profiles: {
        default: {
          url: 'https://compute.example.com',
          token: 'login',
          tenantId: null,
          savedAt: minutesAgo(1).toISOString(),
        },
      },
    });
    const afterLogin = await resolveCredential({ env, target: remote });
    expect(afterLogin).toEqual({
      credential: expect.objectContaining({ source: 'profile', token: 'login' }),
      skipped: [],
    });
    // A better-iam login after it (the store rewritten now) is the newer one.
    saveIamSession({ url: 'https://compute.example.com', token: 'iam2', expiresAt: null });
    expect((await resolveCredential({ env, target: remote })).credential).toMatchObject({
      source: 'better-iam',
      token: 'iam2',
    });
    // The newest cannot be used: the older one is, and the notice says so.
    saveIamSession({
      url: 'https://compute.example.com',
      token: 'iam3',
      expiresAt: '2000-01-01T00:00:00.000Z',
    });
    const passedOver = await resolveCredential({ env, target: remote });
    expect(passedOver.credential).toMatchObject({ source: 'profile', token: 'login' });
    expect(passedOver.notice).toBe(
      `using compute profile "default": the credential saved after it was passed over (Better IAM's session (${iamFile}) expired at 2000-01-01T00:00:00.000Z)`,
    );
    // A profile named on purpose wins whatever was saved after it.
    saveIamSession({ url: 'https://compute.example.com', token: 'iam4', expiresAt: null });
    expect((await resolveCredential({ env, profile: 'default', target: remote })).credential).toMatchObject({
      source: 'profile',
      token: 'login',
    });
  });

  it('none at all leaves the credential empty', async () => {
    expect(await resolveCredential({ env, target: null })).toEqual({ credential: null, skipped: [] });
  });
});

describe('a saved token goes only to the deployment it was saved for', () => {
  it('a profile saved for one origin gives no token to another', async () => {
    await saveProfiles({ default: { url: 'https://a.example.com/api/compute', token: 'a' } }, 'default');
    expect(
      (await resolveCredential({ env, target: { origin: 'https://a.example.com' } })).credential,
    ).toMatchObject({ token: 'a' });
    const other = await resolveCredential({ env, target: { origin: 'https://b.example.com' } });
    expect(other).toEqual({
      credential: null,
      skipped: ['profile "default" was saved for https://a.example.com, not https://b.example.com'],
    });
  });

  it('a profile saved in process is never sent to a remote server', async () => {
    await saveProfiles({ default: { url: null, token: 'local' } }, 'default');
    expect((await resolveCredential({ env, target: null })).credential).toMatchObject({ token: 'local' });
    expect(
      (await resolveCredential({ env, target: { origin: 'https://a.example.com' } })).credential,
    ).toBeNull();
  });

  it('nor is Better IAM’s session saved for another origin', async () => {
    saveIamSession({ url: 'https://iam.example.com', token: 'iam', expiresAt: null });
    const result = await resolveCredential({ env, target: { origin: 'https://compute.example.com' } });
    expect(result.credential).toBeNull();
  });
});

describe('auth login, status and logout', () => {
  let server: FakeServer;
  const cli = createCli({ projectCommands: false });
  beforeAll(async () => {
    server = await fakeServer({
      '/api/compute/system/whoami': (call) =>
        call.headers.authorization === 'Bearer biam_good'
          ? { data: WHOAMI }
          : {
              status: 401,
              error: { code: 'UNAUTHENTICATED', message: 'the credential is unknown, expired or revoked' },
            },
      '/api/compute/events/list': (call) => ({
        data: { items: [], nextCursor: null, auth: call.headers.authorization, tenantId: call.body.tenantId },
      }),
    });
  });
  afterAll(() => server.close());

  it('saves a token read from standard input, checked with system.whoami, as the current profile', async () => {
    const { io, out } = captureIO(env, { stdin: async () => 'biam_good\n' });
    await cli.run(['auth', 'login', '--url', server.url, '--format', 'compact'], io);
    expect(server.calls.at(-1)!.path).toBe('/api/compute/system/whoami');
    expect(JSON.parse(out[0]!)).toEqual({
      profile: 'default',
      url: `${server.url}/api/compute`,
      tenantId: 'acme',
      verified: true,
      principalId: WHOAMI.principalId,
      path: file(),
    });
    expect(out[0]).not.toContain('biam_good');
    expect(statSync(file()).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(file(), 'utf8'))).toMatchObject({
      current: 'default',
      profiles: { default: { url: `${server.url}/api/compute`, token: 'biam_good', tenantId: 'acme' } },
    });

    // Later commands use it for that deployment, with its tenant.
    const later = captureIO({ ...env, BETTER_COMPUTE_URL: server.url });
    await cli.run(['api', 'events.list', '--format', 'compact'], later.io);
    expect(JSON.parse(later.out[0]!)).toMatchObject({ auth: 'Bearer biam_good', tenantId: 'acme' });
  });

  it('refuses a token the deployment does not accept, and saves nothing', async () => {
    const { io, err } = captureIO(env, { stdin: async () => 'biam_bad' });
    expect(await main(['auth', 'login', '--url', server.url], cli, io)).toBe(1);
    expect(err[0]).toBe('UNAUTHENTICATED: the credential is unknown, expired or revoked');
    expect(() => statSync(file())).toThrow();
  });

  it('takes BETTER_COMPUTE_TOKEN with --no-verify, under --profile, without calling anything', async () => {
    const before = server.calls.length;
    const { io } = captureIO({ ...env, BETTER_COMPUTE_TOKEN: 'biam_key_ci' });
    await cli.run(['auth', 'login', '--profile', 'ci', '--no-verify', '--tenant', 'acme'], io);
    expect(server.calls.length).toBe(before);
    expect(await readCredentials(file())).toMatchObject({
      current: 'ci',
      profiles: { ci: { url: null, token: 'biam_key_ci', tenantId: 'acme' } },
    });
  });

  it('never takes the token from an argument, and never prints the argument back', async () => {
    const { io, err } = captureIO(env, { stdin: async () => '' });
    const pasted = 'biam_key_FAKEFAKEFAKEFAKEFAKEFAKE';
    expect(await main(['auth', 'login', pasted, '--no-verify'], cli, io)).toBe(2);
    expect(err).toEqual([
      'INVALID_ARGUMENT: unexpected argument 1 for "auth login": it takes no arguments (the argument is not shown)',
      'hint: auth login reads the token from standard input or BETTER_COMPUTE_TOKEN, never from an argument: better-compute auth login < token.txt',
    ]);
    expect(err.join('\n')).not.toContain('FAKE');
    const empty = captureIO(env, { stdin: async () => '  \n' });
    expect(await main(['auth', 'login', '--no-verify'], cli, empty.io)).toBe(1);
    expect(empty.err[0]).toMatch(/^MISSING_ENV: no token to save/);
  });

  it('status shows source, profile and path, never the token; logout forgets the profile', async () => {
    await saveProfiles(
      { ci: { url: 'https://a.example.com', token: 'secret-token', tenantId: 'acme' } },
      'ci',
    );
    const { io, out } = captureIO({ ...env, BETTER_COMPUTE_URL: 'https://a.example.com' });
    await cli.run(['auth', 'status', '--format', 'compact'], io);
    expect(JSON.parse(out[0]!)).toEqual({
      source: 'profile',
      profile: 'ci',
      path: file(),
      url: 'https://a.example.com',
      tenantId: 'acme',
      expiresAt: null,
      target: 'https://a.example.com',
      currentProfile: 'ci',
      profiles: ['ci'],
    });
    expect(out.join('\n')).not.toContain('secret-token');

    const elsewhere = captureIO({ ...env, BETTER_COMPUTE_URL: 'https://b.example.com' });
    await cli.run(['auth', 'status', '--query', 'source'], elsewhere.io);
    expect(elsewhere.out).toEqual(['none']);

    const logout = captureIO(env);
    await cli.run(['auth', 'logout', '--profile', 'ci', '--format', 'compact'], logout.io);
    expect(JSON.parse(logout.out[0]!)).toEqual({ removed: 'ci', path: file(), current: null });
    expect(statSync(file()).mode & 0o777).toBe(0o600);
    expect((await readCredentials(file())).profiles).toEqual({});
    const again = captureIO(env);
    expect(await main(['auth', 'logout', '--profile', 'ci'], cli, again.io)).toBe(1);
    expect(again.err[0]).toBe(`NOT_FOUND: no saved profile "ci" in ${file()}`);
  });

  it('a command against another origin gets no token from a pinned profile: MISSING_ENV, nothing sent', async () => {
    await saveProfiles({ default: { url: 'https://a.example.com', token: 'pinned' } }, 'default');
    const before = server.calls.length;
    const { io, err } = captureIO({ ...env, BETTER_COMPUTE_URL: server.url });
    expect(await main(['api', 'events.list', '--tenant', 'acme'], cli, io)).toBe(1);
    expect(err[0]).toBe(
      `MISSING_ENV: events.list needs a credential: BETTER_COMPUTE_TOKEN is not set and no saved session or profile applies (profile "default" was saved for https://a.example.com, not ${server.url})`,
    );
    expect(server.calls.length).toBe(before);
  });
});

describe('a credential that cannot travel as a header', () => {
  let server: FakeServer;
  const cli = createCli({ projectCommands: false });
  beforeAll(async () => {
    server = await fakeServer({
      '/api/compute/system/whoami': (call) => ({ data: { ...WHOAMI, auth: call.headers.authorization } }),
    });
  });
  afterAll(() => server.close());

  it('BETTER_COMPUTE_TOKEN with a line break is a usage error naming the variable, never echoed, nothing sent', async () => {
    const before = server.calls.length;
    const { io, out, err } = captureIO({
      ...env,
      BETTER_COMPUTE_URL: server.url,
      BETTER_COMPUTE_TOKEN: 'abc\r\nX-Evil: 1',
    });
    expect(await main(['api', 'system.whoami'], cli, io)).toBe(2);
    expect(out).toEqual([]);
    expect(err).toEqual([
      'INVALID_ARGUMENT: BETTER_COMPUTE_TOKEN must be one line of printable characters without spaces',
      'hint: Set BETTER_COMPUTE_TOKEN to the token alone: no quotes, spaces or line breaks inside it.',
    ]);
    expect(err.join('\n')).not.toContain('Evil');
    expect(server.calls.length).toBe(before);
  });

  it('a token with only a trailing line break is trimmed and works', async () => {
    const { io, out } = captureIO({
      ...env,
      BETTER_COMPUTE_URL: server.url,
      BETTER_COMPUTE_TOKEN: 'biam_good\r\n',
    });
    expect(await main(['api', 'system.whoami', '--query', 'auth'], cli, io)).toBe(0);
    expect(out).toEqual(['Bearer biam_good']);
  });

  it('a saved profile with a space in its token names where it was saved; such a Better IAM session is passed over', async () => {
    await saveProfiles({ ci: { url: server.url, token: 'biam bad' } }, 'ci');
    const saved = captureIO({ ...env, BETTER_COMPUTE_URL: server.url });
    expect(await main(['api', 'system.whoami'], cli, saved.io)).toBe(2);
    expect(saved.err).toEqual([
      `INVALID_ARGUMENT: the token saved in profile "ci" (${file()}) must be one line of printable characters without spaces`,
      'hint: Run "better-compute auth login --profile ci" again, or set BETTER_COMPUTE_TOKEN.',
    ]);
    // Better IAM's session is another program's file: like an expired one, it is passed over.
    await saveProfiles({ ci: { url: server.url, token: 'biam_good' } }, 'ci');
    saveIamSession({ url: server.url, token: 'iam\ttoken', expiresAt: null });
    const iam = captureIO({ ...env, BETTER_COMPUTE_URL: server.url });
    expect(await main(['api', 'system.whoami', '--query', 'auth'], cli, iam.io)).toBe(0);
    expect(iam.out).toEqual(['Bearer biam_good']);
    expect(iam.err.join('\n')).not.toContain('iam\ttoken');
  });

  it('auth login refuses a BETTER_COMPUTE_TOKEN with a space, naming the variable', async () => {
    const { io, err } = captureIO({ ...env, BETTER_COMPUTE_TOKEN: 'biam key' });
    expect(await main(['auth', 'login', '--no-verify'], cli, io)).toBe(2);
    expect(err).toEqual([
      'INVALID_ARGUMENT: BETTER_COMPUTE_TOKEN must be one line of printable characters without spaces',
      'hint: Set BETTER_COMPUTE_TOKEN to the token alone: no quotes, spaces or line breaks inside it.',
    ]);
  });
});

describe('auth status and --profile', () => {
  const cli = createCli({ projectCommands: false });

  it('auth status shows Better IAM’s profile store as the path of its session', async () => {
    saveIamSession({ url: 'https://compute.example.com', token: 'iam', expiresAt: null });
    const { io, out } = captureIO({
      ...env,
      BETTER_COMPUTE_URL: 'https://compute.example.com',
      BETTER_COMPUTE_CREDENTIALS: join(home, 'creds.json'),
    });
    await cli.run(['auth', 'status', '--format', 'compact'], io);
    expect(JSON.parse(out[0]!)).toMatchObject({
      source: 'better-iam',
      profile: 'default',
      path: join(home, 'iam', 'profiles.json'),
    });
  });

  it('a malformed --profile is a usage error even when BETTER_COMPUTE_TOKEN or a session would apply', async () => {
    saveIamSession({ url: 'https://compute.example.com', token: 'iam', expiresAt: null });
    for (const extra of [{}, { BETTER_COMPUTE_TOKEN: 'biam_env' }]) {
      const { io, out, err } = captureIO({
        ...env,
        ...extra,
        BETTER_COMPUTE_URL: 'https://compute.example.com',
      });
      expect(await main(['api', 'system.whoami', '--profile', '../x'], cli, io)).toBe(2);
      expect(out).toEqual([]);
      expect(err).toEqual([
        'INVALID_ARGUMENT: --profile must be letters, digits, . _ or - (got "../x")',
        'hint: Pass --profile with a name such as default or ci; "better-compute auth status" lists the saved profiles.',
      ]);
    }
    const fromEnv = captureIO({ ...env, BETTER_COMPUTE_TOKEN: 'biam_env', BETTER_COMPUTE_PROFILE: 'a b' });
    expect(await main(['auth', 'status'], cli, fromEnv.io)).toBe(2);
    expect(fromEnv.err).toEqual([
      'INVALID_ARGUMENT: BETTER_COMPUTE_PROFILE must be letters, digits, . _ or - (got "a b")',
      'hint: Set BETTER_COMPUTE_PROFILE to a name such as default or ci; "better-compute auth status" lists the saved profiles.',
    ]);
  });
});
