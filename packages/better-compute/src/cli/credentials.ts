/**
 * Credentials, in this order (docs/decisions/credential-order.md): BETTER_COMPUTE_TOKEN; a profile
 * named explicitly (--profile or BETTER_COMPUTE_PROFILE); then, of Better IAM's saved session (when
 * the optional better-iam package answers) and compute's current profile (else `default`), the one
 * saved last, so the login a person just made is the one used. One that cannot be used (expired,
 * broken, saved for another deployment) is passed over and said in `skipped`; when the credential
 * used is not the one saved last, `notice` says so, for stderr.
 *
 * A saved token goes only to the deployment it was saved for: over HTTP, its URL's origin must be
 * the call's; a profile saved in process (without a URL) is never sent to a remote server. The
 * file is found only from the environment, and every write replaces it atomically with mode 0600.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { ComputeError, isBearerToken, isRecord } from '@better-compute/core';
import { CliError } from './errors.js';
import { shownWord } from './shown.js';
import type { CredentialInfo } from './transport-types.js';

interface SavedProfile {
  /** The deployment it was saved for (`https://compute.example.com`); null when saved in process. */
  url: string | null;
  token: string;
  tenantId: string | null;
  savedAt: string;
}

export interface CredentialsFile {
  version: 1;
  current: string | null;
  profiles: Record<string, SavedProfile>;
}

export interface ResolvedCredential extends CredentialInfo {
  token: string;
}

export interface CredentialResolution {
  credential: ResolvedCredential | null;
  /** Why saved credentials were passed over, for the MISSING_ENV message. */
  skipped: string[];
  /** Set when the credential used is not the one saved last: which one is used, and why. */
  notice?: string;
}

/** Where a call goes: the origin of a remote server, or null in process. */
type CallTarget = { origin: string } | null;

const PROFILE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export function assertProfileName(name: string, source = '--profile'): string {
  if (!PROFILE_NAME.test(name)) {
    throw new CliError(
      'INVALID_ARGUMENT',
      `${source} must be letters, digits, . _ or - (got ${shownWord(name)})`,
      {
        hint:
          source === '--profile'
            ? 'Pass --profile with a name such as default or ci; "better-compute auth status" lists the saved profiles.'
            : `Set ${source} to a name such as default or ci; "better-compute auth status" lists the saved profiles.`,
        details: { field: 'profile' },
      },
    );
  }
  return name;
}

/**
 * A credential as it will be sent: surrounding whitespace (a trailing line break from a file or a
 * pasted line) is trimmed; anything else outside visible ASCII is refused, naming where it came
 * from and never echoing it.
 */
export function checkedToken(token: string, source: string, hint: string): string {
  const trimmed = token.trim();
  if (!isBearerToken(trimmed)) {
    throw new CliError(
      'INVALID_ARGUMENT',
      `${source} must be one line of printable characters without spaces`,
      { hint, details: { field: 'token' } },
    );
  }
  return trimmed;
}

/**
 * The credentials file: BETTER_COMPUTE_CREDENTIALS, else %APPDATA%\better-compute\credentials.json
 * on Windows, else $XDG_CONFIG_HOME/better-compute/credentials.json or
 * ~/.config/better-compute/credentials.json.
 */
export function credentialsPath(
  env: Record<string, string | undefined>,
  platform: string = process.platform,
): string {
  if (env.BETTER_COMPUTE_CREDENTIALS) return env.BETTER_COMPUTE_CREDENTIALS;
  if (platform === 'win32') {
    if (env.APPDATA) return `${env.APPDATA}\\better-compute\\credentials.json`;
  } else {
    if (env.XDG_CONFIG_HOME) return join(env.XDG_CONFIG_HOME, 'better-compute', 'credentials.json');
    if (env.HOME) return join(env.HOME, '.config', 'better-compute', 'credentials.json');
  }
  throw new ComputeError(
    'MISSING_ENV',
    'cannot place the credentials file: the environment has no home directory',
    {
      hint:
        platform === 'win32'
          ? 'Set BETTER_COMPUTE_CREDENTIALS or APPDATA.'
          : 'Set BETTER_COMPUTE_CREDENTIALS, XDG_CONFIG_HOME or HOME.',
    },
  );
}

function emptyFile(): CredentialsFile {
  return { version: 1, current: null, profiles: {} };
}

/** Reads the file; a missing file is empty, a malformed one INVALID_CONFIG. */
export async function readCredentials(path: string): Promise<CredentialsFile> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return emptyFile();
    throw error;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (!isRecord(parsed) || !isRecord(parsed.profiles)) {
    throw new ComputeError('INVALID_CONFIG', `the credentials file ${path} is not valid`, {
      hint: 'Remove it and run "better-compute auth login" again.',
    });
  }
  const profiles: Record<string, SavedProfile> = {};
  for (const [name, value] of Object.entries(parsed.profiles)) {
    if (!PROFILE_NAME.test(name) || !isRecord(value) || typeof value.token !== 'string') continue;
    profiles[name] = {
      url: typeof value.url === 'string' ? value.url : null,
      token: value.token,
      tenantId: typeof value.tenantId === 'string' ? value.tenantId : null,
      savedAt: typeof value.savedAt === 'string' ? value.savedAt : '',
    };
  }
  const current =
    typeof parsed.current === 'string' && Object.hasOwn(profiles, parsed.current) ? parsed.current : null;
  return { version: 1, current, profiles };
}

/** Replaces the file atomically (a 0600 temporary file renamed over it), in a 0700 directory. */
export async function writeCredentials(path: string, file: CredentialsFile): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const temp = join(dir, `.credentials.${randomBytes(6).toString('hex')}.tmp`);
  const handle = await open(temp, 'wx', 0o600);
  try {
    await handle.writeFile(`${JSON.stringify(file, null, 2)}\n`, 'utf8');
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    // The mode given to open is narrowed by the umask, never widened; set it exactly.
    await chmod(temp, 0o600);
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
}

function originOf(url: string | null | undefined): string | null {
  if (!url) return null;
  try {
    return new URL(url).origin;
  } catch {
    return null;
  }
}

/** Whether a token saved for `savedUrl` may go where this call goes. */
function mayUse(savedUrl: string | null | undefined, target: CallTarget): boolean {
  if (target === null) return true;
  const saved = originOf(savedUrl);
  return saved !== null && saved === target.origin;
}

interface IamSession {
  /** Better IAM's profile store, where the session was read from. */
  path: string | null;
  token: string;
  url: string | null;
  tenantId: string | null;
  expiresAt: string | null;
  profile: string | null;
}

/** Better IAM's saved session, or null; any failure of the optional package is ignored. */
async function readIamSession(env: Record<string, string | undefined>): Promise<IamSession | null> {
  try {
    const module = (await import('better-iam/profiles')) as unknown as {
      readCurrentIamSession?: (env: Record<string, string | undefined>) => unknown;
      profilesPath?: (env: Record<string, string | undefined>) => unknown;
    };
    // Expired or not: an expired session is passed over here, and said in `skipped`.
    const session = module.readCurrentIamSession?.(env);
    if (!isRecord(session) || typeof session.token !== 'string' || session.token === '') return null;
    let path: string | null = null;
    try {
      const found = module.profilesPath?.(env);
      if (typeof found === 'string') path = found;
    } catch {
      path = null;
    }
    return {
      path,
      token: session.token,
      url: typeof session.url === 'string' ? session.url : null,
      tenantId: typeof session.tenantId === 'string' ? session.tenantId : null,
      expiresAt: typeof session.expiresAt === 'string' ? session.expiresAt : null,
      profile: typeof session.profile === 'string' ? session.profile : null,
    };
  } catch {
    return null;
  }
}

/** Whether a session is past its end; an end that does not parse counts as past, as Better IAM counts it. */
function expired(expiresAt: string | null | undefined, now: Date): boolean {
  if (!expiresAt) return false;
  const time = Date.parse(expiresAt);
  return !Number.isFinite(time) || time <= now.getTime();
}

export interface ResolveOptions {
  env: Record<string, string | undefined>;
  /** --profile, else BETTER_COMPUTE_PROFILE. */
  profile?: string | undefined;
  target: CallTarget;
  now?: Date;
}

/** When a saved credential was written, in milliseconds; an unknown time counts as oldest. */
function savedTime(text: string | null | undefined): number {
  const time = text ? Date.parse(text) : Number.NaN;
  return Number.isFinite(time) ? time : Number.NEGATIVE_INFINITY;
}

async function fileTime(path: string | null): Promise<number> {
  if (!path) return Number.NEGATIVE_INFINITY;
  try {
    return (await stat(path)).mtimeMs;
  } catch {
    return Number.NEGATIVE_INFINITY;
  }
}

/** A saved credential that may be used, with when it was saved. */
interface Candidate {
  credential: ResolvedCredential;
  savedAt: number;
  name: string;
}

/** Better IAM's session as a candidate, or the reason it cannot be used (pushed to `skipped`). */
async function iamCandidate(
  env: Record<string, string | undefined>,
  target: CallTarget,
  now: Date,
  skipped: string[],
): Promise<{ usable: Candidate | null; savedAt: number }> {
  const session = await readIamSession(env);
  if (!session) return { usable: null, savedAt: Number.NEGATIVE_INFINITY };
  // Better IAM records no time per session: its profile store is rewritten by every login.
  const savedAt = await fileTime(session.path);
  // Better IAM's session is another program's file: one that cannot be used (expired, unreadable
  // expiry, or a token that cannot travel as a header) is passed over like a missing one, and said.
  const sessionToken = session.token.trim();
  const where = session.path ? ` (${session.path})` : '';
  if (!isBearerToken(sessionToken)) skipped.push(`Better IAM's session${where} holds a malformed token`);
  else if (expired(session.expiresAt, now))
    skipped.push(`Better IAM's session${where} expired at ${session.expiresAt}`);
  else if (!mayUse(session.url, target))
    skipped.push(`Better IAM's session was saved for ${session.url ?? 'an in-process deployment'}`);
  else
    return {
      savedAt,
      usable: {
        savedAt,
        name: `Better IAM's session${session.profile ? ` (profile "${session.profile}")` : ''}`,
        credential: {
          source: 'better-iam',
          token: sessionToken,
          ...(session.profile ? { profile: session.profile } : {}),
          ...(session.path ? { path: session.path } : {}),
          url: session.url,
          tenantId: session.tenantId,
          expiresAt: session.expiresAt,
        },
      },
    };
  return { usable: null, savedAt };
}

/** Compute's own profile as a candidate, or the reason it cannot be used (pushed to `skipped`). */
async function profileCandidate(
  env: Record<string, string | undefined>,
  explicit: string | undefined,
  target: CallTarget,
  skipped: string[],
): Promise<{ usable: Candidate | null; savedAt: number }> {
  const none = { usable: null, savedAt: Number.NEGATIVE_INFINITY };
  let path: string;
  try {
    path = credentialsPath(env);
  } catch {
    // No place for a credentials file means no saved profile, not a failure: public methods need none.
    skipped.push('the environment names no credentials file (no HOME)');
    return none;
  }
  let file: CredentialsFile;
  try {
    file = await readCredentials(path);
  } catch (error) {
    if (error instanceof ComputeError) throw error;
    skipped.push(`${path} could not be read`);
    return none;
  }
  const name = explicit ? assertProfileName(explicit) : (file.current ?? 'default');
  const profile = Object.hasOwn(file.profiles, name) ? file.profiles[name] : undefined;
  if (!profile) {
    if (explicit) skipped.push(`${path} has no profile "${name}"`);
    return none;
  }
  const savedAt = savedTime(profile.savedAt);
  if (!mayUse(profile.url, target)) {
    skipped.push(
      profile.url
        ? `profile "${name}" was saved for ${originOf(profile.url) ?? profile.url}, not ${target?.origin ?? 'this deployment'}`
        : `profile "${name}" was saved in process and is never sent to a remote server`,
    );
    return { usable: null, savedAt };
  }
  return {
    savedAt,
    usable: {
      savedAt,
      name: `compute profile "${name}"`,
      credential: {
        source: 'profile',
        token: checkedToken(
          profile.token,
          `the token saved in profile "${name}" (${path})`,
          `Run "better-compute auth login --profile ${name}" again, or set BETTER_COMPUTE_TOKEN.`,
        ),
        profile: name,
        path,
        url: profile.url,
        tenantId: profile.tenantId,
      },
    },
  };
}

/** The first credential that applies, in the order above. */
export async function resolveCredential(options: ResolveOptions): Promise<CredentialResolution> {
  const { env, target } = options;
  const now = options.now ?? new Date();
  const skipped: string[] = [];
  // A malformed --profile is a usage mistake whichever credential would apply.
  if (options.profile) assertProfileName(options.profile);
  if (env.BETTER_COMPUTE_TOKEN) {
    const token = checkedToken(
      env.BETTER_COMPUTE_TOKEN,
      'BETTER_COMPUTE_TOKEN',
      'Set BETTER_COMPUTE_TOKEN to the token alone: no quotes, spaces or line breaks inside it.',
    );
    return { credential: { source: 'env', token }, skipped };
  }
  // A profile named on purpose wins over whatever else was saved.
  if (options.profile) {
    const named = await profileCandidate(env, options.profile, target, skipped);
    return { credential: named.usable?.credential ?? null, skipped };
  }

  const iam = await iamCandidate(env, target, now, skipped);
  const own = await profileCandidate(env, undefined, target, skipped);
  const usable = [iam.usable, own.usable].filter((c): c is Candidate => c !== null);
  // The one saved last; on a tie (or unknown times) Better IAM's session, as the guide lists it first.
  const chosen = usable.sort((a, b) => b.savedAt - a.savedAt)[0] ?? null;
  if (!chosen) return { credential: null, skipped };
  const newest = Math.max(iam.savedAt, own.savedAt);
  const resolution: CredentialResolution = { credential: chosen.credential, skipped };
  if (chosen.savedAt < newest && skipped.length) {
    resolution.notice = `using ${chosen.name}: the credential saved after it was passed over (${skipped.join('; ')})`;
  }
  return resolution;
}
