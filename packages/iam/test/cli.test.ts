import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as OTPAuth from 'otpauth';
import { testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { createIam, type Iam } from '../src/index.js';
import { type CliIo, iamBaseUrl, main } from '../src/cli/index.js';
import { profilesPath, readCurrentIamSession, readSavedIamSession } from '../src/cli/profile-store.js';
import { migratedDatabase } from './helpers.js';

const [kind] = await testDatabaseKinds();
const URL_ = 'http://localhost:4000';

describe('the better-iam profile store', () => {
  it('finds the file from the environment it is given', () => {
    expect(profilesPath({ BETTER_IAM_HOME: '/a', XDG_CONFIG_HOME: '/b', HOME: '/c' })).toBe(
      '/a/profiles.json',
    );
    expect(profilesPath({ XDG_CONFIG_HOME: '/b', HOME: '/c' })).toBe('/b/better-iam/profiles.json');
    expect(profilesPath({ HOME: '/c' })).toBe('/c/.config/better-iam/profiles.json');
  });

  it('readSavedIamSession picks BETTER_IAM_PROFILE or the current one, skips expired ones, never throws', () => {
    const home = mkdtempSync(join(tmpdir(), 'biam-'));
    const env = { BETTER_IAM_HOME: home };
    expect(readSavedIamSession(env)).toBeNull();
    const profile = (token: string, expiresAt: string | null) => ({
      url: URL_,
      token,
      tenantId: 'acme',
      principalId: 'usr_x',
      expiresAt,
    });
    writeFileSync(
      join(home, 'profiles.json'),
      JSON.stringify({
        current: 'work',
        profiles: {
          work: profile('biam_ses_work', '2999-01-01T00:00:00.000Z'),
          old: profile('biam_ses_old', '2001-01-01T00:00:00.000Z'),
          key: profile('biam_key_k', null),
        },
      }),
    );
    expect(readSavedIamSession(env)).toEqual({
      token: 'biam_ses_work',
      url: URL_,
      tenantId: 'acme',
      expiresAt: '2999-01-01T00:00:00.000Z',
      profile: 'work',
    });
    expect(readSavedIamSession({ ...env, BETTER_IAM_PROFILE: 'old' })).toBeNull();
    // The current session as saved, expired or not, so compute can say why it passed one over.
    expect(readCurrentIamSession({ ...env, BETTER_IAM_PROFILE: 'old' })).toMatchObject({
      token: 'biam_ses_old',
      expiresAt: '2001-01-01T00:00:00.000Z',
    });
    expect(readSavedIamSession({ ...env, BETTER_IAM_PROFILE: 'key' })?.token).toBe('biam_key_k');
    expect(readSavedIamSession({ ...env, BETTER_IAM_PROFILE: 'missing' })).toBeNull();
    expect(readSavedIamSession({ ...env, BETTER_IAM_PROFILE: '__proto__' })).toBeNull();
    for (const broken of ['{', 'null', '[]', '{"profiles": 3}', '"x"']) {
      writeFileSync(join(home, 'profiles.json'), broken);
      expect(readSavedIamSession(env)).toBeNull();
    }
    expect(readSavedIamSession({ BETTER_IAM_HOME: join(home, 'profiles.json', 'not-a-dir') })).toBeNull();
  });

  it('plain http is only for loopback', () => {
    expect(iamBaseUrl('http://localhost:4000')).toBe('http://localhost:4000/api/iam');
    expect(iamBaseUrl('https://iam.example.com/custom/iam/')).toBe('https://iam.example.com/custom/iam');
    expect(() => iamBaseUrl('http://iam.example.com')).toThrow(/https/);
  });
});

describe.runIf(kind !== undefined)('the better-iam command line', () => {
  let database: TestDatabase;
  let iam: Iam;
  let home: string;

  beforeAll(async () => {
    database = await migratedDatabase(kind!);
    iam = createIam({ database });
    await iam.bootstrapRootAdmin({ email: 'root@root.test', password: 'root password 123' });
    home = mkdtempSync(join(tmpdir(), 'biam-cli-'));
  });
  afterAll(async () => {
    await iam?.close();
    await database?.close();
  });

  async function run(argv: string[], stdin = '', env: Record<string, string> = {}) {
    let out = '';
    let err = '';
    const io: CliIo = {
      env: { BETTER_IAM_HOME: home, ...env },
      stdout: (text) => void (out += text),
      stderr: (text) => void (err += text),
      readStdin: async () => stdin,
      fetch: (async (input: string | URL | Request, init?: RequestInit) =>
        iam.handler(new Request(input, init))) as typeof fetch,
    };
    const status = await main(argv, io);
    // Help is text; every other answer is JSON.
    const json = out.startsWith('{') ? (JSON.parse(out) as Record<string, unknown>) : null;
    return { status, out, err, json };
  }

  it('refuses secrets in arguments and unknown flags as usage errors (exit 2)', async () => {
    const secret = await run(['login', '--url', URL_, '--email', 'root@root.test', '--password', 'x']);
    expect(secret.status).toBe(2);
    expect(secret.err).toMatch(/^INVALID_ARGUMENT: --password is not accepted/);
    expect((await run(['tenants', 'create', 'x', '--nme', 'X'])).status).toBe(2);
    expect((await run(['frobnicate'])).status).toBe(2);
    expect((await run(['login', '--url', 'http://iam.example.com', '--email', 'a@b.c'], 'pw')).err).toMatch(
      /https/,
    );
  });

  it('prints a server’s error terminal-safe: no control, C1 or bidirectional character reaches the terminal (issue 15)', async () => {
    const hostile = 'tenant \u001b]0;owned\u0007 \u202eexe.txt\u009b2J done';
    const io: CliIo = {
      env: { BETTER_IAM_HOME: home },
      stdout: () => {},
      stderr: (text) => void (err += text),
      readStdin: async () => '',
      // The printer is what is tried here: the answer is the envelope a server sends, with hostile words.
      fetch: (async () =>
        new Response(JSON.stringify({ error: { code: 'NOT_FOUND', message: hostile, hint: hostile } }), {
          status: 404,
          headers: { 'content-type': 'application/json' },
        })) as typeof fetch,
    };
    let err = '';
    expect(
      await main(['tenants', 'get', 'acme', '--url', URL_], {
        ...io,
        env: { ...io.env, BETTER_IAM_TOKEN: 'biam_ses_x' },
      }),
    ).toBe(1);
    expect(err).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
    expect(err).toContain('NOT_FOUND: tenant  ]0;owned   exe.txt 2J done');
  });

  it('logs in with the password from stdin, saves a 0600 profile, and the session works', async () => {
    const wrong = await run(['login', '--url', URL_, '--email', 'root@root.test'], 'wrong password 1\n');
    expect(wrong.status).toBe(1);
    expect(wrong.err).toBe('UNAUTHENTICATED: invalid email, password or tenant\n');
    const login = await run(['login', '--url', URL_, '--email', 'root@root.test'], 'root password 123\n');
    expect(login.status).toBe(0);
    expect(login.json).toMatchObject({ profile: 'default', tenantId: 'root', mfa: false });
    expect(login.out).not.toContain('biam_ses_');
    const path = join(home, 'profiles.json');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const saved = readSavedIamSession({ BETTER_IAM_HOME: home });
    expect(saved?.token).toMatch(/^biam_ses_/);
    const who = await run(['whoami']);
    expect(who.json).toMatchObject({ identity: { tenantId: 'root', credentialKind: 'session' } });
  });

  it('administers tenants, users, keys, roles and bindings', async () => {
    const tenant = await run(['tenants', 'create', 'clitest', '--name', 'CLI test']);
    expect(tenant.json).toMatchObject({ id: 'clitest', state: 'active' });
    const user = await run(
      ['users', 'create', '--tenant', 'clitest', '--email', 'dev@clitest.test', '--password-stdin'],
      'dev password 123\n',
    );
    expect(user.status).toBe(0);
    const userId = user.json!.id as string;
    const binding = await run([
      'bindings',
      'create',
      '--tenant',
      'clitest',
      '--role',
      'member',
      '--principal',
      userId,
    ]);
    expect(binding.json).toMatchObject({ roleName: 'member', principalId: userId });
    const key = await run(['keys', 'create', '--tenant', 'clitest', '--principal', userId, '--name', 'ci']);
    const secret = key.json!.key as string;
    expect(secret).toMatch(/^biam_key_/);
    const keys = await run(['keys', 'list', '--tenant', 'clitest', '--principal', userId]);
    expect(keys.out).not.toContain(secret);
    const asUser = await run(['whoami'], '', { BETTER_IAM_TOKEN: secret, BETTER_IAM_URL: URL_ });
    expect(asUser.json).toMatchObject({ identity: { principalId: userId, credentialKind: 'api-key' } });
    const denied = await run(['tenants', 'create', 'nope', '--name', 'No'], '', { BETTER_IAM_TOKEN: secret });
    expect(denied.status).toBe(1);
    expect(denied.err).toMatch(/^ACCESS_DENIED: iam:tenants:create is not allowed/);
    expect(
      (
        await run([
          'keys',
          'revoke',
          '--tenant',
          'clitest',
          key.json!.apiKey ? (key.json!.apiKey as { id: string }).id : '',
        ])
      ).status,
    ).toBe(0);
    expect((await run(['whoami'], '', { BETTER_IAM_TOKEN: secret })).err).toMatch(/^UNAUTHENTICATED/);
    const role = await run([
      'roles',
      'create',
      'typo',
      '--tenant',
      'clitest',
      '--actions',
      'compute:nothing:here',
    ]);
    expect(role.err).toBe('INVALID_ARGUMENT: compute:nothing:here matches no known action\n');
    expect(role.status).toBe(1);
    expect((await run(['users', 'disable', userId, '--tenant', 'clitest'])).json).toMatchObject({
      disabled: true,
    });
    expect((await run(['tenants', 'suspend', 'clitest'])).json).toMatchObject({ state: 'suspended' });
    expect((await run(['tenants', 'list'])).json).toMatchObject({
      items: expect.arrayContaining([expect.objectContaining({ id: 'clitest' })]),
    });
  });

  it('login with TOTP reads the code from the line after the password', async () => {
    const person = await iam.createPerson({
      tenantId: 'root',
      email: 'mfa@root.test',
      password: 'mfa password 123',
    });
    const { secret } = await iam.enrollTotp(person.id);
    const code = (offset: number) =>
      new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret) }).generate({
        timestamp: Date.now() + offset,
      });
    await iam.confirmTotp(person.id, code(-30_000));
    const without = await run(
      ['login', '--url', URL_, '--email', 'mfa@root.test', '--profile', 'mfa'],
      'mfa password 123\n',
    );
    expect(without.status).toBe(1);
    expect(without.err).toContain('UNAUTHENTICATED: a TOTP code is required');
    expect(without.err).toContain('--totp-stdin');
    const ok = await run(
      ['login', '--url', URL_, '--email', 'mfa@root.test', '--profile', 'mfa', '--totp-stdin'],
      `mfa password 123\n${code(0)}\n`,
    );
    expect(ok.json).toMatchObject({ profile: 'mfa', mfa: true });
    const viaEnv = await run(
      ['login', '--url', URL_, '--email', 'mfa@root.test', '--profile', 'mfa2', '--totp-stdin'],
      `${code(30_000)}\n`,
      {
        BETTER_IAM_PASSWORD: 'mfa password 123',
      },
    );
    expect(viaEnv.json).toMatchObject({ profile: 'mfa2', mfa: true });
    expect((await run(['logout', '--profile', 'mfa'])).json).toEqual({ profile: 'mfa', revoked: true });
    expect((await run(['logout', '--profile', 'mfa2'])).json).toEqual({ profile: 'mfa2', revoked: true });
    // The default profile becomes current again for the next test.
    const file = JSON.parse(readFileSync(join(home, 'profiles.json'), 'utf8')) as { current: string };
    expect(file.current).toBe('default');
  });

  it('totp enroll and totp confirm act as the saved session; the code comes from stdin only', async () => {
    const own = mkdtempSync(join(tmpdir(), 'biam-totp-'));
    const as = { BETTER_IAM_HOME: own };
    await iam.createPerson({ tenantId: 'root', email: 'enroll@root.test', password: 'enroll password 1' });
    const noSession = await run(['totp', 'enroll', '--url', URL_], '', as);
    expect(noSession.status).toBe(1);
    expect(noSession.err).toMatch(/^MISSING_ENV: no credential\nhint: Run better-iam login/);
    expect(
      (await run(['login', '--url', URL_, '--email', 'enroll@root.test'], 'enroll password 1\n', as)).status,
    ).toBe(0);
    const early = await run(['totp', 'confirm'], '123456\n', as);
    expect(early.status).toBe(1);
    expect(early.err).toMatch(/^INVALID_STATE: TOTP is not being enrolled/);

    const enroll = await run(['totp', 'enroll'], '', as);
    expect(enroll.status).toBe(0);
    const secret = enroll.json!.secret as string;
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
    expect(enroll.json!.uri).toMatch(/^otpauth:\/\/totp\/Better%20IAM:enroll%40root\.test\?/);
    expect(enroll.json!.uri).toContain(`secret=${secret}`);
    // The secret goes to stdout once; the note on stderr never repeats it.
    expect(enroll.err).toContain('not shown again');
    expect(enroll.err).not.toContain(secret);
    const totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret) });
    const code = (offset: number) => totp.generate({ timestamp: Date.now() + offset });

    const inArgv = await run(['totp', 'confirm', '--code', code(0)], '', as);
    expect(inArgv.status).toBe(2);
    expect(inArgv.err).toMatch(
      /^INVALID_ARGUMENT: --code is not accepted: secrets are read from standard input/,
    );
    const garbled = await run(['totp', 'confirm'], 'twelve\n', as);
    expect(garbled.status).toBe(2);
    expect(garbled.err).toMatch(/^INVALID_ARGUMENT: totp confirm needs the 6-digit code/);
    const near = new Set([code(-30_000), code(0), code(30_000)]);
    const wrong = ['000000', '111111', '222222', '333333'].find((c) => !near.has(c))!;
    const bad = await run(['totp', 'confirm'], `${wrong}\n`, as);
    expect(bad.status).toBe(1);
    expect(bad.err).toBe('INVALID_ARGUMENT: invalid TOTP code\n');

    const confirm = await run(['totp', 'confirm'], `${code(0)}\n`, as);
    expect(confirm.status).toBe(0);
    expect(confirm.json).toMatchObject({ confirmed: true, next: expect.stringContaining('--totp-stdin') });
    expect((await run(['totp', 'enroll'], '', as)).err).toMatch(/^ALREADY_EXISTS: /);

    const without = await run(
      ['login', '--url', URL_, '--email', 'enroll@root.test'],
      'enroll password 1\n',
      as,
    );
    expect(without.status).toBe(1);
    expect(without.err).toContain('hint: Add --totp-stdin');
    // The confirming code's time step is spent; the next step's code is accepted.
    const withCode = await run(
      ['login', '--url', URL_, '--email', 'enroll@root.test', '--totp-stdin'],
      `enroll password 1\n${code(30_000)}\n`,
      as,
    );
    expect(withCode.json).toMatchObject({ mfa: true });
    for (const result of [enroll, confirm, without, withCode])
      expect(result.err).not.toContain('enroll password 1');
  });

  it('keys create takes --expires-at or --expires-in, not both', async () => {
    const before = Date.now();
    const key = await run(['keys', 'create', '--name', 'ninety', '--expires-in', '90d']);
    expect(key.status).toBe(0);
    const expiresAt = Date.parse((key.json!.apiKey as { expiresAt: string }).expiresAt);
    expect(expiresAt).toBeGreaterThanOrEqual(before + 90 * 86_400_000 - 1000);
    expect(expiresAt).toBeLessThanOrEqual(Date.now() + 90 * 86_400_000 + 1000);
    expect((await run(['keys', 'create', '--name', 'x', '--expires-in', '5x'])).err).toMatch(
      /^INVALID_ARGUMENT: --expires-in "5x" is not a duration/,
    );
    const both = await run([
      'keys',
      'create',
      '--name',
      'x',
      '--expires-in',
      '1d',
      '--expires-at',
      '2999-01-01T00:00:00Z',
    ]);
    expect(both.status).toBe(2);
  });

  it('help names the totp commands', async () => {
    const help = await run(['--help']);
    expect(help.out).toContain('totp enroll');
    expect(help.out).toContain('totp confirm');
    expect((await run(['totp'])).err).toContain('Try one of: totp enroll, totp confirm, totp remove.');
  });

  it('logout revokes the session and forgets the profile', async () => {
    const token = readSavedIamSession({ BETTER_IAM_HOME: home })!.token;
    const out = await run(['logout']);
    expect(out.json).toEqual({ profile: 'default', revoked: true });
    expect(await iam.authenticate(token)).toBeNull();
    expect(readSavedIamSession({ BETTER_IAM_HOME: home })).toBeNull();
    expect(JSON.parse(readFileSync(join(home, 'profiles.json'), 'utf8'))).toEqual({
      current: 'default',
      profiles: {},
    });
  });
});
