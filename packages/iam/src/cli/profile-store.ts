/**
 * The better-iam profile store: saved sessions, one per profile, in
 * `$BETTER_IAM_HOME/profiles.json`, else `$XDG_CONFIG_HOME/better-iam/profiles.json`, else
 * `~/.config/better-iam/profiles.json`. better-compute's CLI imports this file on its credential
 * path, so it stays tiny and dependency-free, reads the environment only from its argument, and
 * `readSavedIamSession` never throws: a broken file must not block compute's own credentials.
 */
import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

export type Env = Record<string, string | undefined>;

export interface IamProfile {
  url: string;
  token: string;
  tenantId: string;
  principalId: string;
  /** ISO time the session ends, or null for a credential that does not expire. */
  expiresAt: string | null;
}

export interface ProfileFile {
  current: string;
  profiles: Record<string, IamProfile>;
}

export interface SavedIamSession {
  token: string;
  url: string;
  tenantId: string;
  expiresAt: string | null;
  profile: string;
}

/** Where the profile file lives, from the given environment only. */
export function profilesPath(env: Env): string {
  if (env.BETTER_IAM_HOME) return join(env.BETTER_IAM_HOME, 'profiles.json');
  if (env.XDG_CONFIG_HOME) return join(env.XDG_CONFIG_HOME, 'better-iam', 'profiles.json');
  return join(env.HOME || homedir(), '.config', 'better-iam', 'profiles.json');
}

function isProfile(value: unknown): value is IamProfile {
  if (typeof value !== 'object' || value === null) return false;
  const p = value as Record<string, unknown>;
  return (
    typeof p.url === 'string' &&
    typeof p.token === 'string' &&
    p.token.length > 0 &&
    typeof p.tenantId === 'string' &&
    typeof p.principalId === 'string' &&
    (p.expiresAt === null || p.expiresAt === undefined || typeof p.expiresAt === 'string')
  );
}

/** The profile file, or an empty one when it is missing. Throws when it exists but is broken. */
export function readProfiles(env: Env): ProfileFile {
  let text: string;
  try {
    text = readFileSync(profilesPath(env), 'utf8');
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ENOENT') return { current: 'default', profiles: {} };
    throw error;
  }
  const value = JSON.parse(text) as { current?: unknown; profiles?: unknown };
  if (
    typeof value !== 'object' ||
    value === null ||
    typeof value.profiles !== 'object' ||
    value.profiles === null
  ) {
    throw new Error('the profile file is not a better-iam profile file');
  }
  const profiles: Record<string, IamProfile> = {};
  for (const [name, profile] of Object.entries(value.profiles as Record<string, unknown>)) {
    if (isProfile(profile)) profiles[name] = { ...profile, expiresAt: profile.expiresAt ?? null };
  }
  return { current: typeof value.current === 'string' ? value.current : 'default', profiles };
}

/** Replaces the profile file atomically (temporary file, then rename), readable by its owner only. */
export function writeProfiles(env: Env, file: ProfileFile): string {
  const path = profilesPath(env);
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.${Date.now()}.tmp`;
  try {
    writeFileSync(temporary, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
    chmodSync(temporary, 0o600);
    renameSync(temporary, path);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
  return path;
}

/**
 * The saved session compute should use: profile `BETTER_IAM_PROFILE`, else the file's current one.
 * null when there is none, when it has expired, and for any missing, unreadable or broken file.
 */
export function readSavedIamSession(env: Env, now: Date = new Date()): SavedIamSession | null {
  const session = readCurrentIamSession(env);
  if (session?.expiresAt != null) {
    const ends = Date.parse(session.expiresAt);
    if (Number.isNaN(ends) || ends <= now.getTime()) return null;
  }
  return session;
}

/**
 * The current saved session whether or not it has expired, so a caller can say why it passed one
 * over; null when there is none, and for any missing, unreadable or broken file.
 */
export function readCurrentIamSession(env: Env): SavedIamSession | null {
  try {
    const file = readProfiles(env);
    const name = env.BETTER_IAM_PROFILE || file.current;
    const profile = Object.hasOwn(file.profiles, name) ? file.profiles[name] : undefined;
    if (!profile) return null;
    return {
      token: profile.token,
      url: profile.url,
      tenantId: profile.tenantId,
      expiresAt: profile.expiresAt,
      profile: name,
    };
  } catch {
    return null;
  }
}
