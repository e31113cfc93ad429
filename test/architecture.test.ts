/**
 * The layering docs/architecture.md states, checked on the source: which package may import which,
 * which folders of the server may import which, and no import cycle among source files. A new import
 * that crosses a line fails here, with the file and the import named.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
const SOURCE = /\.(ts|tsx|mts|mjs)$/;

function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory())
      return entry.name === 'node_modules' || entry.name === 'dist' ? [] : sourceFiles(path);
    return SOURCE.test(entry.name) && !/\.test\.|\.d\.ts$/.test(entry.name) ? [path] : [];
  });
}

interface Import {
  specifier: string;
  /** `import type` / `export type`: erased at run time. */
  typeOnly: boolean;
  /** `import('…')`: loaded when first used, not when the file loads. */
  dynamic: boolean;
}

/** The imports of a file, read as text: static ones, re-exports and dynamic `import()`. */
function importsOf(file: string): Import[] {
  const text = readFileSync(file, 'utf8');
  const found: Import[] = [];
  const staticImport = /^\s*(import|export)\s+(type\s+)?(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]/gm;
  for (const match of text.matchAll(staticImport)) {
    found.push({ specifier: match[3]!, typeOnly: Boolean(match[2]), dynamic: false });
  }
  for (const match of text.matchAll(/import\(\s*['"]([^'"]+)['"]\s*\)/g)) {
    found.push({ specifier: match[1]!, typeOnly: false, dynamic: true });
  }
  return found;
}

/** The package name of a bare specifier: `@scope/name` or `name`. */
const packageOf = (specifier: string) =>
  specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]!;

/** Packages of this repository and the ones of ours each may import (third-party packages are free). */
const OURS = [
  '@better-compute/core',
  '@better-compute/db',
  '@better-compute/events',
  '@better-compute/client',
  '@better-compute/console-kit',
  'better-iam',
  'better-compute',
  'bcd',
];
const MAY_IMPORT: Record<string, string[]> = {
  core: [],
  events: ['@better-compute/core'],
  client: ['@better-compute/core', '@better-compute/events'],
  'console-kit': ['@better-compute/core', '@better-compute/events', '@better-compute/client'],
  db: ['@better-compute/core'],
  iam: ['@better-compute/core', '@better-compute/db'],
  daemon: ['@better-compute/core', '@better-compute/events', '@better-compute/client'],
  'better-compute': [
    '@better-compute/core',
    '@better-compute/db',
    '@better-compute/events',
    '@better-compute/client',
    'better-iam',
  ],
};

const packagesDir = join(root, 'packages');
const packageDirs = readdirSync(packagesDir).filter((name) => existsSync(join(packagesDir, name, 'src')));

describe('which package imports which', () => {
  it('every package of the repository has a rule', () => {
    expect(packageDirs.filter((name) => !(name in MAY_IMPORT))).toEqual([]);
  });

  it.each(packageDirs)('%s imports only the packages of ours it may', (name) => {
    const allowed = new Set(MAY_IMPORT[name] ?? []);
    const crossings: string[] = [];
    for (const file of sourceFiles(join(packagesDir, name, 'src'))) {
      for (const { specifier } of importsOf(file)) {
        if (specifier.startsWith('.') || specifier.startsWith('node:')) continue;
        const target = packageOf(specifier);
        if (OURS.includes(target) && !allowed.has(target))
          crossings.push(`${relative(root, file)} imports ${specifier}`);
        // A relative path that leaves the package is an import of another package's internals.
      }
      for (const { specifier } of importsOf(file)) {
        if (!specifier.startsWith('.')) continue;
        const target = resolve(dirname(file), specifier);
        if (!target.startsWith(join(packagesDir, name) + '/'))
          crossings.push(`${relative(root, file)} reaches outside its package: ${specifier}`);
      }
    }
    expect(crossings).toEqual([]);
  });
});

describe('which folder of the server imports which', () => {
  const server = join(packagesDir, 'better-compute', 'src');
  // A module's code never reaches the hosts or the command line; the request pipeline, the store
  // and the workers never reach into a module's files: they know modules only through the module
  // contract (modules/define-module.ts) and get them as values from compute.ts.
  const CONTRACT = 'modules/define-module.js';
  const forbidden: [string, string[]][] = [
    ['modules', ['host', 'cli']],
    ['http', ['modules', 'host', 'cli']],
    ['db', ['modules', 'host', 'cli', 'http']],
    ['workers', ['host', 'cli']],
    ['config', ['modules', 'host', 'cli', 'http']],
  ];
  it.each(forbidden)('%s imports none of %j (but the module contract)', (from, targets) => {
    const crossings: string[] = [];
    for (const file of sourceFiles(join(server, from))) {
      for (const { specifier } of importsOf(file)) {
        if (!specifier.startsWith('.')) continue;
        const target = relative(server, resolve(dirname(file), specifier));
        if (target === CONTRACT) continue;
        if (targets.includes(target.split('/')[0]!))
          crossings.push(`${relative(root, file)} imports ${specifier}`);
      }
    }
    expect(crossings).toEqual([]);
  });
});

describe('file size', () => {
  it('no source file outside tests is over 600 lines', () => {
    const long = packageDirs
      .flatMap((name) => sourceFiles(join(packagesDir, name, 'src')))
      .map((file) => {
        const text = readFileSync(file, 'utf8');
        return { file: relative(root, file), lines: text.split('\n').length - (text.endsWith('\n') ? 1 : 0) };
      })
      .filter(({ lines }) => lines > 600)
      .map(({ file, lines }) => `${file}: ${lines} lines`);
    expect(long).toEqual([]);
  });
});

describe('import cycles', () => {
  /** Resolves a relative specifier to a source file (`./x.js` is `./x.ts` in the source). */
  function resolveFile(from: string, specifier: string): string | undefined {
    const base = resolve(dirname(from), specifier);
    const candidates = [
      base,
      base.replace(/\.js$/, '.ts'),
      base.replace(/\.mjs$/, '.mts'),
      `${base}.ts`,
      join(base, 'index.ts'),
    ];
    return candidates.find((candidate) => existsSync(candidate) && SOURCE.test(candidate));
  }

  /**
   * Where a lazy `import()` is left out of the cycle check: the server package, whose command line
   * loads a command's code only when that command runs. Everywhere else (IAM included) a lazy import
   * is an import like any other.
   */
  const LAZY_IMPORTS_LEFT_OUT = join(packagesDir, 'better-compute') + '/';

  it('no source file reaches itself through its imports (type imports included; a lazy import() only in the server is left out)', () => {
    const files = packageDirs.flatMap((name) => sourceFiles(join(packagesDir, name, 'src')));
    const edges = new Map<string, string[]>();
    for (const file of files) {
      const lazyLeftOut = file.startsWith(LAZY_IMPORTS_LEFT_OUT);
      edges.set(
        file,
        importsOf(file)
          .filter((imported) => imported.specifier.startsWith('.') && !(imported.dynamic && lazyLeftOut))
          .map((imported) => resolveFile(file, imported.specifier))
          .filter((target): target is string => target !== undefined),
      );
    }
    // Tarjan's strongly connected components: a component of more than one file is a cycle.
    const index = new Map<string, number>();
    const low = new Map<string, number>();
    const stack: string[] = [];
    const onStack = new Set<string>();
    const cycles: string[][] = [];
    let counter = 0;
    const visit = (file: string) => {
      index.set(file, counter);
      low.set(file, counter++);
      stack.push(file);
      onStack.add(file);
      for (const next of edges.get(file) ?? []) {
        if (!index.has(next)) {
          visit(next);
          low.set(file, Math.min(low.get(file)!, low.get(next)!));
        } else if (onStack.has(next)) low.set(file, Math.min(low.get(file)!, index.get(next)!));
      }
      if (low.get(file) === index.get(file)) {
        const component: string[] = [];
        let member: string;
        do {
          member = stack.pop()!;
          onStack.delete(member);
          component.push(relative(root, member));
        } while (member !== file);
        if (component.length > 1) cycles.push(component.sort());
      }
    };
    for (const file of files) if (!index.has(file)) visit(file);
    expect(cycles).toEqual([]);
  });
});
