/**
 * `better-iam`, the administrators' command line. It talks HTTP to a deployment's `/api/iam`
 * routes (plain http only to loopback), saves sessions in the profile store better-compute reads,
 * and takes every secret (passwords, TOTP codes) from standard input or the environment, never
 * from arguments. Output is JSON; failures print `CODE: message` and exit 2 for usage, 1 otherwise.
 * It imports nothing heavy: no zod, no database.
 */
import { hideSecrets, safeCell, safeJson } from '@better-compute/core';
import { type Env, type IamProfile, profilesPath, readProfiles, writeProfiles } from './profile-store.js';

export interface CliIo {
  env: Env;
  stdout(text: string): void;
  stderr(text: string): void;
  /** All of standard input, as text. */
  readStdin(): Promise<string>;
  fetch: typeof fetch;
}

class CliError extends Error {
  readonly code: string;
  readonly hint: string | undefined;
  /** A mistake on the command line itself (exit 2), as opposed to a failed call (exit 1). */
  readonly usage: boolean;
  constructor(code: string, message: string, hint?: string, usage = false) {
    super(message);
    this.code = code;
    this.hint = hint;
    this.usage = usage;
  }
}

const usage = (message: string, hint?: string) => new CliError('INVALID_ARGUMENT', message, hint, true);

const HELP = `better-iam: administer Better IAM over its /api/iam routes

  login --url URL --email EMAIL [--tenant T] [--profile P] [--totp-stdin]
        password from BETTER_IAM_PASSWORD or the first line of stdin; with --totp-stdin the
        TOTP code is the next line of stdin
  logout [--profile P]             revoke the saved session and forget it
  whoami                           the identity of the saved session
  totp enroll                      start your own TOTP second factor: prints the otpauth URI and
                                   the base32 secret once, to load into your authenticator
  totp confirm                     finish it with the current 6-digit code, the first line of stdin;
                                   from then on login needs --totp-stdin; prints recovery codes once
  totp remove                      remove your factor: the current code or a recovery code on stdin
  password change                  the current password and the new one on stdin, one a line
  tenants create ID --name NAME [--parent P] | list | get | suspend ID | reactivate ID | delete ID
  users create --email EMAIL [--name NAME] [--password-stdin] | list | get ID | disable ID | enable ID
        | reset-password ID (a one-time password, shown once) | reset-totp ID
  service-accounts create --name NAME
  keys create --name NAME [--principal ID] [--expires-at ISO | --expires-in 90d] (the key is shown once)
       | list [--principal ID] | revoke ID
  roles create NAME --actions A,B [--description TEXT] | list | delete ID
  bindings create --role ROLE (--principal ID | --group ID) [--project ID | --resource TYPE:ID]
           | list [--principal ID] | revoke ID

Every command takes --url, --profile and --tenant. The token is BETTER_IAM_TOKEN, else the
profile's (BETTER_IAM_PROFILE, else the current profile). Profiles: ${'$'}BETTER_IAM_HOME/profiles.json,
else ${'$'}XDG_CONFIG_HOME/better-iam/profiles.json, else ~/.config/better-iam/profiles.json.`;

interface Parsed {
  positionals: string[];
  flags: Map<string, string | true>;
}

const VALUE_FLAGS = new Set([
  'url',
  'email',
  'tenant',
  'profile',
  'name',
  'parent',
  'principal',
  'expires-at',
  'expires-in',
  'actions',
  'description',
  'role',
  'group',
  'project',
  'resource',
  'kind',
  'limit',
  'cursor',
]);
const BOOLEAN_FLAGS = new Set(['totp-stdin', 'password-stdin', 'help']);
const SECRET_FLAGS = new Set(['password', 'token', 'key', 'totp', 'secret', 'code']);

function parse(argv: string[]): Parsed {
  const parsed: Parsed = { positionals: [], flags: new Map() };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      parsed.positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('--')) {
      parsed.positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq === -1 ? undefined : eq);
    if (SECRET_FLAGS.has(name)) {
      throw usage(
        `--${name} is not accepted: secrets are read from standard input, never from arguments`,
        'Pipe it in, for example: better-iam login … < password.txt',
      );
    }
    if (BOOLEAN_FLAGS.has(name)) {
      if (eq !== -1) throw usage(`--${name} takes no value`);
      parsed.flags.set(name, true);
      continue;
    }
    if (!VALUE_FLAGS.has(name)) throw usage(`unknown flag --${name}`, 'Run better-iam --help.');
    const value = eq === -1 ? argv[++i] : arg.slice(eq + 1);
    if (value === undefined || value === '') throw usage(`--${name} needs a value`);
    parsed.flags.set(name, value);
  }
  return parsed;
}

function flag(parsed: Parsed, name: string): string | undefined {
  const value = parsed.flags.get(name);
  return typeof value === 'string' ? value : undefined;
}

function requireFlag(parsed: Parsed, name: string): string {
  const value = flag(parsed, name);
  if (value === undefined) throw usage(`--${name} is required`);
  return value;
}

function positional(parsed: Parsed, index: number, what: string): string {
  const value = parsed.positionals[index];
  if (value === undefined) throw usage(`${what} is required`);
  return value;
}

/** The `/api/iam` base of a URL; plain http only for loopback hosts, so a token never crosses a network in clear. */
export function iamBaseUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw usage(`--url ${JSON.stringify(raw)} is not a URL`);
  }
  const loopback =
    ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname) || url.hostname.endsWith('.localhost');
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback)) {
    throw usage('the URL must use https (plain http only for localhost, 127.0.0.1, [::1] and *.localhost)');
  }
  if (url.username || url.password) throw usage('the URL must not carry credentials');
  const path = url.pathname.replace(/\/+$/, '');
  return `${url.origin}${path === '' ? '/api/iam' : path}`;
}

interface Target {
  base: string;
  token: string | null;
  profileName: string;
  profile: IamProfile | undefined;
}

function resolveTarget(parsed: Parsed, io: CliIo, needToken: boolean): Target {
  let file;
  try {
    file = readProfiles(io.env);
  } catch {
    file = { current: 'default', profiles: {} };
  }
  const profileName = flag(parsed, 'profile') ?? (io.env.BETTER_IAM_PROFILE || file.current);
  const profile = Object.hasOwn(file.profiles, profileName) ? file.profiles[profileName] : undefined;
  const rawUrl = flag(parsed, 'url') ?? io.env.BETTER_IAM_URL ?? profile?.url;
  if (!rawUrl)
    throw new CliError(
      'MISSING_ENV',
      'no deployment URL',
      'Pass --url, set BETTER_IAM_URL, or run better-iam login.',
    );
  const base = iamBaseUrl(rawUrl);
  // A profile's token goes only to the deployment it was saved for.
  const profileToken = profile && iamBaseUrl(profile.url) === base ? profile.token : null;
  const token = io.env.BETTER_IAM_TOKEN || profileToken;
  if (needToken && !token)
    throw new CliError('MISSING_ENV', 'no credential', 'Run better-iam login, or set BETTER_IAM_TOKEN.');
  return { base, token, profileName, profile };
}

async function call(
  io: CliIo,
  target: Target,
  method: string,
  input: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const [group, name] = method.split('.');
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'x-request-id': `req_cli_${Date.now().toString(36)}`,
  };
  if (target.token) headers.authorization = `Bearer ${target.token}`;
  let response: Response;
  try {
    response = await io.fetch(`${target.base}/${group}/${name}`, {
      method: 'POST',
      headers,
      body: JSON.stringify(input),
    });
  } catch (error) {
    throw new CliError('UNAVAILABLE', `could not reach ${target.base}: ${(error as Error).message}`);
  }
  let body: {
    data?: Record<string, unknown>;
    error?: {
      code?: string;
      message?: string;
      details?: { issues?: { path?: string[]; message?: string }[] };
    };
  };
  try {
    body = (await response.json()) as typeof body;
  } catch {
    throw new CliError(
      'INVALID_RESPONSE',
      `${target.base} did not answer with JSON (HTTP ${response.status})`,
    );
  }
  if (body.error) {
    const issue = body.error.details?.issues?.[0];
    const where = issue ? ` (${issue.path?.join('.') || 'input'}: ${issue.message ?? 'invalid'})` : '';
    throw new CliError(body.error.code ?? 'INTERNAL', `${body.error.message ?? 'the call failed'}${where}`);
  }
  if (!response.ok || body.data === undefined)
    throw new CliError('INVALID_RESPONSE', `unexpected answer (HTTP ${response.status})`);
  return body.data;
}

/** `--expires-at ISO` or `--expires-in 90d` (s, m, h, d or w), as the ISO time the API takes. */
function expiryFlags(parsed: Parsed, now: Date = new Date()): Record<string, unknown> {
  const at = flag(parsed, 'expires-at');
  const within = flag(parsed, 'expires-in');
  if (at !== undefined && within !== undefined)
    throw usage('pass at most one of --expires-at and --expires-in');
  if (at !== undefined) return { expiresAt: at };
  if (within === undefined) return {};
  const match = /^(\d+)([smhdw])$/.exec(within);
  const amount = match ? Number(match[1]) : 0;
  if (!match || amount < 1)
    throw usage(`--expires-in ${JSON.stringify(within)} is not a duration like 90d, 12h or 30m`);
  const seconds = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 }[match[2] as 's' | 'm' | 'h' | 'd' | 'w'];
  const ends = now.getTime() + amount * seconds * 1000;
  if (!Number.isFinite(ends) || ends > 8.64e15) throw usage('--expires-in is too far in the future');
  return { expiresAt: new Date(ends).toISOString() };
}

/** The TOTP code on the first line of standard input; never an argument. */
async function codeFromStdin(io: CliIo): Promise<string> {
  const code = (stdinLines(await io.readStdin())[0] ?? '').trim();
  if (!/^\d{6}$/.test(code))
    throw usage(
      'totp confirm needs the 6-digit code from your authenticator on standard input',
      'Pipe it in, for example: echo 123456 | better-iam totp confirm',
    );
  return code;
}

/** A current TOTP code or a recovery code, the first line of standard input; never an argument. */
async function secondFactorFromStdin(io: CliIo): Promise<string> {
  const code = (stdinLines(await io.readStdin())[0] ?? '').trim();
  if (!/^(\d{6}|[a-z0-9]{5}-[a-z0-9]{5})$/.test(code))
    throw usage(
      'totp remove needs the current 6-digit code, or a recovery code, on standard input',
      'Pipe it in, for example: echo 123456 | better-iam totp remove',
    );
  return code;
}

function stdinLines(text: string): string[] {
  return text.split(/\r?\n/);
}

function withTenant(parsed: Parsed, input: Record<string, unknown>): Record<string, unknown> {
  const tenantId = flag(parsed, 'tenant');
  return tenantId === undefined ? input : { ...input, tenantId };
}

function pageFlags(parsed: Parsed): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const limit = flag(parsed, 'limit');
  if (limit !== undefined) {
    const n = Number(limit);
    if (!Number.isInteger(n) || n < 1) throw usage('--limit must be a positive whole number');
    out.limit = n;
  }
  const cursor = flag(parsed, 'cursor');
  if (cursor !== undefined) out.cursor = cursor;
  return out;
}

async function login(parsed: Parsed, io: CliIo): Promise<unknown> {
  const url = requireFlag(parsed, 'url');
  const email = requireFlag(parsed, 'email');
  const tenantId = flag(parsed, 'tenant') ?? 'root';
  const base = iamBaseUrl(url);
  // stdin holds the password (unless BETTER_IAM_PASSWORD is set), then the TOTP code with --totp-stdin.
  const needsStdin = io.env.BETTER_IAM_PASSWORD === undefined || parsed.flags.has('totp-stdin');
  const lines = needsStdin ? stdinLines(await io.readStdin()) : [];
  let password = io.env.BETTER_IAM_PASSWORD;
  let next = 0;
  if (password === undefined) {
    password = lines[0] ?? '';
    next = 1;
  }
  if (password === '')
    throw usage(
      'no password on standard input',
      'Pipe it in: better-iam login … < password.txt, or set BETTER_IAM_PASSWORD.',
    );
  const input: Record<string, unknown> = { tenantId, email, password };
  if (parsed.flags.has('totp-stdin')) {
    const code = (lines[next] ?? '').trim();
    if (!/^\d{6}$/.test(code))
      throw usage(
        '--totp-stdin needs a 6-digit code on standard input (after the password, unless BETTER_IAM_PASSWORD is set)',
      );
    input.totp = code;
  }
  const target: Target = { base, token: null, profileName: '', profile: undefined };
  let data: Record<string, unknown>;
  try {
    data = await call(io, target, 'sessions.signIn', input);
  } catch (error) {
    if (error instanceof CliError && error.message === 'a TOTP code is required') {
      throw new CliError(
        error.code,
        error.message,
        'Add --totp-stdin and send the code on the line after the password.',
      );
    }
    throw error;
  }
  const session = data.session as { id: string; expiresAt: string; mfa: boolean };
  const principal = data.principal as { id: string; tenantId: string };
  let file;
  try {
    file = readProfiles(io.env);
  } catch {
    file = { current: 'default', profiles: {} };
  }
  const profileName = flag(parsed, 'profile') ?? (io.env.BETTER_IAM_PROFILE || 'default');
  file.profiles[profileName] = {
    url,
    token: data.token as string,
    tenantId: principal.tenantId,
    principalId: principal.id,
    expiresAt: session.expiresAt,
  };
  file.current = profileName;
  const path = writeProfiles(io.env, file);
  return {
    profile: profileName,
    path,
    principalId: principal.id,
    tenantId: principal.tenantId,
    sessionId: session.id,
    mfa: session.mfa,
    expiresAt: session.expiresAt,
  };
}

async function logout(parsed: Parsed, io: CliIo): Promise<unknown> {
  const file = readProfiles(io.env);
  const profileName = flag(parsed, 'profile') ?? (io.env.BETTER_IAM_PROFILE || file.current);
  const profile = Object.hasOwn(file.profiles, profileName) ? file.profiles[profileName] : undefined;
  if (!profile) throw new CliError('NOT_FOUND', `there is no profile ${profileName}`);
  let revoked = false;
  try {
    const data = await call(
      io,
      { base: iamBaseUrl(profile.url), token: profile.token, profileName, profile },
      'sessions.signOut',
      {},
    );
    revoked = data.revoked === true;
  } catch (error) {
    // An expired or already revoked session still gets forgotten locally.
    if (!(error instanceof CliError) || error.code !== 'UNAUTHENTICATED') throw error;
  }
  delete file.profiles[profileName];
  if (file.current === profileName) file.current = Object.keys(file.profiles)[0] ?? 'default';
  writeProfiles(io.env, file);
  return { profile: profileName, revoked };
}

type Handler = (parsed: Parsed, io: CliIo) => Promise<unknown>;

function remote(
  method: string,
  build: (parsed: Parsed, io: CliIo) => Promise<Record<string, unknown>> | Record<string, unknown>,
): Handler {
  return async (parsed, io) => call(io, resolveTarget(parsed, io, true), method, await build(parsed, io));
}

async function passwordFromStdin(parsed: Parsed, io: CliIo): Promise<string | undefined> {
  if (!parsed.flags.has('password-stdin')) return undefined;
  const password = stdinLines(await io.readStdin())[0] ?? '';
  if (password.length < 8) throw usage('the password on standard input must be at least 8 characters');
  return password;
}

function scopeFlags(parsed: Parsed): Record<string, unknown> | undefined {
  const project = flag(parsed, 'project');
  const resource = flag(parsed, 'resource');
  if (project !== undefined && resource !== undefined)
    throw usage('pass at most one of --project and --resource');
  if (project !== undefined) return { type: 'project', id: project };
  if (resource !== undefined) {
    const index = resource.indexOf(':');
    if (index <= 0 || index === resource.length - 1)
      throw usage('--resource takes TYPE:ID, for example compute-pool:pool_01…');
    return { type: 'resource', resourceType: resource.slice(0, index), id: resource.slice(index + 1) };
  }
  return undefined;
}

const COMMANDS: Record<string, Handler> = {
  login,
  logout,
  whoami: remote('sessions.get', () => ({})),
  // Your own second factor, as the saved session: the secret is shown here once and never again.
  'totp enroll': async (parsed, io) => {
    const data = await call(io, resolveTarget(parsed, io, true), 'totp.enroll', {});
    io.stderr(
      'Load the uri (or the secret) into your authenticator now; it is not shown again. Then run: better-iam totp confirm < code.txt\n',
    );
    return { uri: data.uri, secret: data.secret };
  },
  'totp confirm': async (parsed, io) => {
    const target = resolveTarget(parsed, io, true);
    const data = await call(io, target, 'totp.confirm', { code: await codeFromStdin(io) });
    return {
      confirmed: data.confirmed === true,
      // Shown this once: each signs in once without the authenticator (in place of the code).
      recoveryCodes: data.recoveryCodes,
      next: 'better-iam login now needs --totp-stdin: the code goes on the line after the password. Keep the recovery codes somewhere safe: they are not shown again.',
    };
  },
  'totp remove': remote('totp.remove', async (_p, io) => ({ code: await secondFactorFromStdin(io) })),
  'password change': remote('passwords.change', async (_p, io) => {
    const [currentPassword = '', newPassword = ''] = stdinLines(await io.readStdin());
    if (!currentPassword || newPassword.length < 8)
      throw usage(
        'password change reads the current password and the new one (8 characters or more) from standard input, one a line',
        'For example: printf "%s\\n%s\\n" "$OLD" "$NEW" | better-iam password change',
      );
    return { currentPassword, newPassword };
  }),
  'tenants create': remote('tenants.create', (p) => ({
    id: positional(p, 2, 'the tenant id'),
    name: requireFlag(p, 'name'),
    ...(flag(p, 'parent') ? { parentId: flag(p, 'parent') } : {}),
  })),
  'tenants list': remote('tenants.list', (p) => withTenant(p, pageFlags(p))),
  'tenants get': remote('tenants.get', (p) =>
    p.positionals[2] ? { tenantId: p.positionals[2] } : withTenant(p, {}),
  ),
  'tenants suspend': remote('tenants.suspend', (p) => ({ id: positional(p, 2, 'the tenant id') })),
  'tenants reactivate': remote('tenants.reactivate', (p) => ({ id: positional(p, 2, 'the tenant id') })),
  'tenants delete': remote('tenants.delete', (p) => ({ id: positional(p, 2, 'the tenant id') })),
  'users create': remote('principals.create', async (p, io) => {
    const password = await passwordFromStdin(p, io);
    return withTenant(p, {
      kind: 'person',
      email: requireFlag(p, 'email'),
      ...(flag(p, 'name') ? { displayName: flag(p, 'name') } : {}),
      ...(password !== undefined ? { password } : {}),
    });
  }),
  'users list': remote('principals.list', (p) => withTenant(p, { kind: 'person', ...pageFlags(p) })),
  'users get': remote('principals.get', (p) =>
    withTenant(p, { principalId: positional(p, 2, 'the principal id') }),
  ),
  'users disable': remote('principals.disable', (p) =>
    withTenant(p, { principalId: positional(p, 2, 'the principal id') }),
  ),
  'users enable': remote('principals.enable', (p) =>
    withTenant(p, { principalId: positional(p, 2, 'the principal id') }),
  ),
  // Recovery for a person who lost their password or authenticator; the one-time password is shown once.
  'users reset-password': remote('passwords.reset', (p) =>
    withTenant(p, { principalId: positional(p, 2, 'the principal id') }),
  ),
  'users reset-totp': remote('totp.reset', (p) =>
    withTenant(p, { principalId: positional(p, 2, 'the principal id') }),
  ),
  'service-accounts create': remote('principals.create', (p) =>
    withTenant(p, { kind: 'service-account', displayName: requireFlag(p, 'name') }),
  ),
  'keys create': remote('apiKeys.create', (p) =>
    withTenant(p, {
      name: requireFlag(p, 'name'),
      ...(flag(p, 'principal') ? { principalId: flag(p, 'principal') } : {}),
      ...expiryFlags(p),
    }),
  ),
  'keys list': remote('apiKeys.list', (p) =>
    withTenant(p, {
      ...(flag(p, 'principal') ? { principalId: flag(p, 'principal') } : {}),
      ...pageFlags(p),
    }),
  ),
  'keys revoke': remote('apiKeys.revoke', (p) => withTenant(p, { apiKeyId: positional(p, 2, 'the key id') })),
  'roles create': remote('roles.create', (p) =>
    withTenant(p, {
      name: positional(p, 2, 'the role name'),
      actions: requireFlag(p, 'actions')
        .split(',')
        .map((a) => a.trim())
        .filter(Boolean),
      ...(flag(p, 'description') ? { description: flag(p, 'description') } : {}),
    }),
  ),
  'roles list': remote('roles.list', (p) => withTenant(p, {})),
  'roles delete': remote('roles.delete', (p) => withTenant(p, { roleId: positional(p, 2, 'the role id') })),
  'bindings create': remote('bindings.create', (p) => {
    const principal = flag(p, 'principal');
    const group = flag(p, 'group');
    if ((principal === undefined) === (group === undefined))
      throw usage('pass exactly one of --principal and --group');
    const scope = scopeFlags(p);
    return withTenant(p, {
      role: requireFlag(p, 'role'),
      ...(principal ? { principalId: principal } : { groupId: group }),
      ...(scope ? { scope } : {}),
    });
  }),
  'bindings list': remote('bindings.list', (p) =>
    withTenant(p, {
      ...(flag(p, 'principal') ? { principalId: flag(p, 'principal') } : {}),
      ...pageFlags(p),
    }),
  ),
  'bindings revoke': remote('bindings.revoke', (p) =>
    withTenant(p, { bindingId: positional(p, 2, 'the binding id') }),
  ),
};

function defaultIo(): CliIo {
  return {
    env: process.env,
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    async readStdin() {
      if (process.stdin.isTTY) return '';
      const chunks: Buffer[] = [];
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks).toString('utf8');
    },
    fetch: globalThis.fetch,
  };
}

/** Runs one command line; resolves to the exit status. */
export async function main(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  try {
    const parsed = parse(argv);
    if (parsed.flags.has('help') || parsed.positionals[0] === 'help') {
      io.stdout(`${HELP}\n`);
      return 0;
    }
    if (parsed.positionals.length === 0) throw usage('no command given', 'Run better-iam --help.');
    const [first, second] = parsed.positionals;
    const handler = COMMANDS[first!] ?? (second !== undefined ? COMMANDS[`${first} ${second}`] : undefined);
    if (!handler) {
      const known = Object.keys(COMMANDS).filter((name) => name.startsWith(`${first} `) || name === first);
      throw usage(
        `unknown command ${parsed.positionals.slice(0, 2).join(' ')}`,
        known.length > 0 ? `Try one of: ${known.join(', ')}.` : 'Run better-iam --help.',
      );
    }
    const result = await handler(parsed, io);
    io.stdout(`${safeJson(JSON.stringify(result, null, 2))}\n`);
    return 0;
  } catch (error) {
    const failure =
      error instanceof CliError
        ? error
        : new CliError('INTERNAL', error instanceof Error ? error.message : String(error));
    // The server's words reach a terminal: no control or bidirectional character may act on it.
    io.stderr(`${safeCell(failure.code)}: ${safeCell(hideSecrets(failure.message))}\n`);
    if (failure.hint) io.stderr(`hint: ${safeCell(hideSecrets(failure.hint))}\n`);
    return failure.usage ? 2 : 1;
  }
}

export { profilesPath };
