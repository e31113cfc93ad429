/**
 * The daemon's runtime directory: where the unix sockets of its VMs (QMP, serial console, guest
 * agent) live, apart from the state directory. A socket's path is limited to 107 bytes by the
 * kernel, and a state directory may be anywhere (a checkout's `.better-compute/bcd` under a long
 * path, a CI workspace), so no socket path is made from it: the runtime directory is short and
 * keyed by a hash of the state directory, so every daemon has its own and finds it again.
 *
 *   root                     /run/better-compute/<hash>
 *   another user             $XDG_RUNTIME_DIR/better-compute/<hash>, else /tmp/better-compute-<uid>/<hash>
 *   bcd run --runtime-dir    that directory (BCD_RUNTIME_DIR the same)
 *
 * Each directory the daemon makes is 0700 and must be its own: one under /tmp that another user
 * made first (or a symlink) is refused rather than used.
 */
import { createHash } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync, rmSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { RuntimeError } from './image-cache.js';

/** What moves the runtime directory; named in every refusal of a path too long. */
export const RUNTIME_DIR_SETTING = 'bcd run --runtime-dir DIR (or BCD_RUNTIME_DIR)';

/**
 * The longest socket path the runtime makes: sun_path holds 108 bytes with its NUL, and QEMU
 * keeps a few for itself on some builds.
 */
const SOCKET_PATH_LIMIT = 100;

/** 16 hex digits of the SHA-256 of the state directory's absolute path. */
export function stateDirKey(stateDir: string): string {
  return createHash('sha256').update(resolve(stateDir)).digest('hex').slice(0, 16);
}

/** The runtime directory of the daemon whose state is in `stateDir`, as the table above says. */
export function runtimeDirFor(
  stateDir: string,
  env: Record<string, string | undefined> = process.env,
  uid: number = process.getuid?.() ?? 0,
): string {
  if (env.BCD_RUNTIME_DIR) return resolve(env.BCD_RUNTIME_DIR);
  const key = stateDirKey(stateDir);
  if (uid === 0) return join('/run/better-compute', key);
  if (env.XDG_RUNTIME_DIR?.startsWith('/')) return join(env.XDG_RUNTIME_DIR, 'better-compute', key);
  return join(`/tmp/better-compute-${uid}`, key);
}

/**
 * Makes `dir` (and the parents it needs) 0700, and checks that the directory and its parent are
 * directories of this user, not symlinks: a directory another user made in /tmp is refused.
 */
export function ensurePrivateDir(dir: string): void {
  const uid = process.getuid?.() ?? 0;
  for (const path of [dirname(dir), dir]) {
    // A shared parent such as /run or $XDG_RUNTIME_DIR is the system's; only ours are checked.
    if (path === dirname(dir) && !basename(path).startsWith('better-compute')) continue;
    mkdirSync(path, { recursive: true, mode: 0o700 });
    const stat = lstatSync(path);
    if (!stat.isDirectory() || stat.uid !== uid)
      throw new RuntimeError(
        `${path} is not a directory of this user (uid ${uid}), so the daemon will not put its sockets there; remove it, or move the runtime directory with ${RUNTIME_DIR_SETTING}`,
      );
    if ((stat.mode & 0o077) !== 0) chmodSync(path, 0o700);
  }
}

/** 12 hex digits of an id's SHA-256: a VM's socket directory, short whatever the id's length. */
export function shortName(id: string): string {
  return createHash('sha256').update(id).digest('hex').slice(0, 12);
}

/** The socket directory of the VM `id`: `<runtime-dir>/<short name>`, made afresh (0700). */
export function makeSocketDir(runtimeDir: string, id: string): string {
  ensurePrivateDir(runtimeDir);
  const dir = join(runtimeDir, shortName(id));
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { mode: 0o700 });
  return dir;
}

/**
 * The socket `name` in `dir`, refused when its path would not fit a unix socket address, with the
 * setting that moves it.
 */
export function socketPath(dir: string, name: string): string {
  const path = join(dir, name);
  if (Buffer.byteLength(path) > SOCKET_PATH_LIMIT)
    throw new RuntimeError(
      `the socket path ${path.slice(0, 200)} is ${Buffer.byteLength(path)} bytes, more than the ${SOCKET_PATH_LIMIT} a unix socket allows; move the runtime directory to a shorter path with ${RUNTIME_DIR_SETTING}`,
    );
  // QEMU splits its options at commas, so a path with one would change what an option says.
  if (path.includes(','))
    throw new RuntimeError(
      `the socket path ${path.slice(0, 200)} has a comma, which QEMU options cannot hold; move the runtime directory with ${RUNTIME_DIR_SETTING}`,
    );
  return path;
}
