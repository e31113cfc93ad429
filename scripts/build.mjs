#!/usr/bin/env node
// Builds every workspace package from src/ to dist/ with esbuild. Each package bundles only its own
// code: imports of other packages stay imports, so there is one copy of each class at run time
// (an error thrown by core is `instanceof ComputeError` everywhere). Entry points are the package's
// exports; code splitting lets the CLI load a command's code only when that command runs.
import { build } from 'esbuild';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const workspaces = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).workspaces;

for (const dir of workspaces) {
  const pkgDir = join(root, dir);
  const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
  const entryPoints = Object.values(pkg.exports ?? {})
    .map((entry) => entry.source)
    .filter(Boolean)
    .map((source) => join(pkgDir, source));
  for (const extra of pkg.buildEntries ?? []) entryPoints.push(join(pkgDir, extra));
  rmSync(join(pkgDir, 'dist'), { recursive: true, force: true });
  await build({
    entryPoints,
    outdir: join(pkgDir, 'dist'),
    outbase: join(pkgDir, 'src'),
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    sourcemap: 'linked',
    chunkNames: 'chunks/[name]-[hash]',
    logLevel: 'warning',
  });
}
