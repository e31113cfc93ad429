#!/usr/bin/env node
// The quick start's first step: installs dependencies when they are missing or the lock file
// changed, and rebuilds when a source file is newer than the last build. Pass --no-build to skip
// the build.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const stampFile = join(root, 'node_modules', '.ensure-stamp');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

function manifestsHash() {
  const hash = createHash('sha256');
  const root_pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  hash.update(readFileSync(join(root, 'package.json')));
  for (const dir of root_pkg.workspaces) hash.update(readFileSync(join(root, dir, 'package.json')));
  if (existsSync(join(root, 'package-lock.json'))) hash.update(readFileSync(join(root, 'package-lock.json')));
  return hash.digest('hex');
}

const wanted = manifestsHash();
const installed = existsSync(stampFile) ? readFileSync(stampFile, 'utf8') : '';
if (installed !== wanted || !existsSync(join(root, 'node_modules', '.bin', 'vitest'))) {
  console.error('better-compute: installing dependencies…');
  execFileSync(npm, ['install', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: root,
    stdio: 'inherit',
  });
  writeFileSync(stampFile, manifestsHash());
}

if (!process.argv.includes('--no-build')) {
  const buildStamp = join(root, 'node_modules', '.build-stamp');
  const builtAt = existsSync(buildStamp) ? statSync(buildStamp).mtimeMs : 0;
  const newest = (dir) => {
    let latest = 0;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
    }
    return latest;
  };
  // Packages build to dist/; apps (the console) build their own way, below.
  const packages = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).workspaces.filter((dir) =>
    dir.startsWith('packages/'),
  );
  const sourceTime = Math.max(
    statSync(join(root, 'scripts', 'build.mjs')).mtimeMs,
    ...packages.map((dir) => newest(join(root, dir, 'src'))),
  );
  if (sourceTime > builtAt || packages.some((dir) => !existsSync(join(root, dir, 'dist')))) {
    console.error('better-compute: building…');
    execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs')], { cwd: root, stdio: 'inherit' });
    writeFileSync(buildStamp, new Date().toISOString());
  }
}

// The console's Next.js build, redone only when a source it is built from changed (its own files,
// and the packages its pages bundle): the hash of those files is kept beside the build.
if (!process.argv.includes('--no-build')) {
  const consoleDir = join(root, 'apps', 'console');
  const hashFile = join(consoleDir, '.next', 'source-hash');
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
  const sourceHash = hash.digest('hex');
  const built = existsSync(hashFile) ? readFileSync(hashFile, 'utf8') : '';
  if (built !== sourceHash || !existsSync(join(consoleDir, '.next', 'BUILD_ID'))) {
    console.error('better-compute: building the console…');
    execFileSync(process.execPath, [join(root, 'node_modules', 'next', 'dist', 'bin', 'next'), 'build'], {
      cwd: consoleDir,
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...process.env, NEXT_TELEMETRY_DISABLED: '1' },
    });
    writeFileSync(hashFile, sourceHash);
  }
}
