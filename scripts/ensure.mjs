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
  const packages = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).workspaces;
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
