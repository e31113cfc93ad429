#!/usr/bin/env node
/**
 * What a command needs before it runs, each step done only when it is missing or stale, with one
 * progress line per step it does:
 *
 *   node scripts/ensure.mjs [--no-build] [--console] [--host GROUP,…]
 *
 *   (always)      npm install, when node_modules is missing or a manifest or the lock file changed
 *   (default)     the packages' build (src/ → dist/), when a source is newer than the last build;
 *                 --no-build skips it
 *   --console     the console's Next.js production build, when a source it is built from changed
 *   --host G,…    the host programs of those groups (scripts/host-tools.mjs), as root; without root
 *                 it prints the command that installs them
 *
 * Builds take a lock, so test runs and `npm run dev` started side by side never build over each
 * other: the second waits, then finds the build done.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const say = (line) => console.error(`better-compute: ${line}`);

export function ensureDependencies() {
  const stampFile = join(root, 'node_modules', '.ensure-stamp');
  const wanted = manifestsHash();
  const installed = existsSync(stampFile) ? readFileSync(stampFile, 'utf8') : '';
  if (installed === wanted && existsSync(join(root, 'node_modules', '.bin', 'vitest'))) return;
  say('installing dependencies…');
  execFileSync(npm, ['install', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: root,
    stdio: 'inherit',
  });
  writeFileSync(stampFile, manifestsHash());
}

function manifestsHash() {
  const hash = createHash('sha256');
  hash.update(readFileSync(join(root, 'package.json')));
  for (const dir of workspaces()) hash.update(readFileSync(join(root, dir, 'package.json')));
  if (existsSync(join(root, 'package-lock.json'))) hash.update(readFileSync(join(root, 'package-lock.json')));
  return hash.digest('hex');
}

function workspaces() {
  return JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).workspaces;
}

/** The packages' esbuild build, when a source is newer than the last one. */
export function ensurePackagesBuilt() {
  const buildStamp = join(root, 'node_modules', '.build-stamp');
  const packages = workspaces().filter((dir) => dir.startsWith('packages/'));
  const stale = () => {
    const builtAt = existsSync(buildStamp) ? statSync(buildStamp).mtimeMs : 0;
    const sourceTime = Math.max(
      statSync(join(root, 'scripts', 'build.mjs')).mtimeMs,
      ...packages.map((dir) => newest(join(root, dir, 'src'))),
      ...packages.map((dir) => statSync(join(root, dir, 'package.json')).mtimeMs),
    );
    return sourceTime > builtAt || packages.some((dir) => !existsSync(join(root, dir, 'dist')));
  };
  if (!stale()) return;
  withLock('build', () => {
    if (!stale()) return;
    say('building the packages…');
    // The stamp takes the time the build started: a source saved during the build is newer than it.
    const startedAt = new Date();
    execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs')], { cwd: root, stdio: 'inherit' });
    writeFileSync(buildStamp, startedAt.toISOString());
    utimesSync(buildStamp, startedAt, startedAt);
  });
}

function newest(dir) {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

/**
 * The console's Next.js build, redone only when a source it is built from changed (its own files,
 * and the packages its pages bundle): the hash of those files is kept beside the build.
 */
export function ensureConsoleBuilt() {
  const consoleDir = join(root, 'apps', 'console');
  const hashFile = join(consoleDir, '.next', 'source-hash');
  const sourceHash = consoleSourceHash(consoleDir);
  const fresh = () =>
    existsSync(hashFile) &&
    readFileSync(hashFile, 'utf8') === sourceHash &&
    existsSync(join(consoleDir, '.next', 'BUILD_ID'));
  if (fresh()) return;
  withLock('console-build', () => {
    if (fresh()) return;
    say('building the console…');
    execFileSync(process.execPath, [join(root, 'node_modules', 'next', 'dist', 'bin', 'next'), 'build'], {
      cwd: consoleDir,
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...process.env, NEXT_TELEMETRY_DISABLED: '1' },
    });
    writeFileSync(hashFile, sourceHash);
  });
}

function consoleSourceHash(consoleDir) {
  const hash = createHash('sha256');
  const addTree = (path) => {
    if (!existsSync(path)) return;
    if (statSync(path).isDirectory()) {
      for (const name of readdirSync(path).sort()) addTree(join(path, name));
    } else {
      hash.update(path.slice(root.length));
      hash.update(readFileSync(path));
    }
  };
  for (const part of ['src', 'next.config.mjs', 'tsconfig.json', 'package.json'])
    addTree(join(consoleDir, part));
  for (const dir of ['packages/console-kit/src', 'packages/client/src', 'packages/core/src'])
    addTree(join(root, dir));
  return hash.digest('hex');
}

/**
 * Runs fn holding a lock directory under node_modules/.locks. A lock whose holder is gone (a build
 * killed half-way) is taken over.
 */
export function withLock(name, fn) {
  const dir = join(root, 'node_modules', '.locks');
  mkdirSync(dir, { recursive: true });
  const lock = join(dir, name);
  const sleeper = new Int32Array(new SharedArrayBuffer(4));
  let told = false;
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, 'pid'), String(process.pid));
      break;
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
      if (!holderAlive(lock)) {
        rmSync(lock, { recursive: true, force: true });
        continue;
      }
      if (!told) say(`waiting for another ${name} to finish…`);
      told = true;
      Atomics.wait(sleeper, 0, 0, 250);
    }
  }
  try {
    return fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

function holderAlive(lock) {
  let pid;
  try {
    pid = Number(readFileSync(join(lock, 'pid'), 'utf8'));
  } catch {
    // Made but its pid not yet written: give the holder a moment.
    try {
      return Date.now() - statSync(lock).mtimeMs < 5_000;
    } catch {
      return false;
    }
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

/** The host programs of the groups; returns the commands still missing. */
export async function ensureHostTools(groups, why) {
  const { installHostTools } = await import('./host-tools.mjs');
  return installHostTools(groups, { log: (line) => console.error(line), why });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const hostAt = args.indexOf('--host');
  const groups = hostAt >= 0 ? (args[hostAt + 1] ?? '').split(',').filter(Boolean) : [];
  ensureDependencies();
  if (!args.includes('--no-build')) ensurePackagesBuilt();
  if (args.includes('--console')) ensureConsoleBuilt();
  if (groups.length > 0)
    await ensureHostTools(groups, groups.includes('node') ? 'the real node' : 'the tests');
}
