#!/usr/bin/env node
// Builds every workspace package from src/ to dist/ with esbuild. Each package bundles only its own
// code: imports of other packages stay imports, so there is one copy of each class at run time
// (an error thrown by core is `instanceof ComputeError` everywhere). Entry points are the package's
// exports; code splitting lets a program load a module only when it runs it.
//
// A package's `binBundle` is its command's start-up file, or a list of them: each one CommonJS
// bundle (CommonJS loads faster than a tree of ES modules) with the packages it names inlined;
// everything a command needs beyond its definition stays behind a dynamic import. Core's ComputeError recognises errors of any
// copy of itself, so an inlined copy is safe.
//
// A package's `binManifest` names the built CLI bundle and a JSON file to write from it: the
// manifest of the built-in commands, from which the start-up file prints help pages without
// loading the CLI.
//
// Each package builds into dist.next/ and then takes dist/'s place in two renames, so a program
// started from dist/ while a build runs finds a whole build, the old one or the new one.
import { build } from 'esbuild';
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
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
  const bundles = [pkg.binBundle ?? []].flat();
  // A workspace with nothing to build (the console builds with Next.js) keeps no dist/.
  if (entryPoints.length === 0 && bundles.length === 0) continue;
  const next = join(pkgDir, 'dist.next');
  rmSync(next, { recursive: true, force: true });
  await build({
    entryPoints,
    outdir: next,
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
  for (const bundle of bundles) {
    const inline = new Set(bundle.inline ?? []);
    await build({
      entryPoints: [join(pkgDir, bundle.entry)],
      outfile: join(next, bundle.outfile.replace(/^(\.\/)?dist\//, '')),
      bundle: true,
      format: 'cjs',
      platform: 'node',
      target: 'node20',
      conditions: ['source'],
      logLevel: 'warning',
      plugins: [
        {
          name: 'external-packages',
          setup(builder) {
            builder.onResolve({ filter: /^[^./]/ }, (args) =>
              inline.has(args.path) ? undefined : { path: args.path, external: true },
            );
          },
        },
      ],
    });
  }
  // `binManifest`: the built-in commands' manifest, from the built CLI, for the entry's help pages.
  if (pkg.binManifest) {
    const cli = createRequire(import.meta.url)(
      join(next, pkg.binManifest.program.replace(/^(\.\/)?dist\//, '')),
    );
    const manifest = cli.createCli({ projectCommands: false }).manifest();
    const outfile = join(next, pkg.binManifest.outfile.replace(/^(\.\/)?dist\//, ''));
    writeFileSync(outfile, JSON.stringify(manifest));
    // The index beside it (`help.json` → `help-index.json`): names, groups and summaries only.
    const commands = manifest.commands.map(({ name, group, summary }) => ({ name, group, summary }));
    writeFileSync(outfile.replace(/\.json$/, '-index.json'), JSON.stringify({ ...manifest, commands }));
  }
  const old = join(pkgDir, 'dist.old');
  rmSync(old, { recursive: true, force: true });
  if (existsSync(join(pkgDir, 'dist'))) renameSync(join(pkgDir, 'dist'), old);
  renameSync(next, join(pkgDir, 'dist'));
  rmSync(old, { recursive: true, force: true });
}
