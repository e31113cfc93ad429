/**
 * The map docs/architecture.md draws, checked on the source: which package may import which, what
 * each folder of a package may import (every folder has a rule), which modules of the server use
 * which, that code outside modules/ reaches a module through its index.ts, that no part queries
 * another's tables outside the named shared kernel, that the page names every part, and no import
 * cycle among source files. A new import, folder or query that crosses a line fails here, with the
 * file and what to do named.
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

describe("the console's pages", () => {
  // The console's server (server.mjs, lib/, console.config.mjs) mounts compute and IAM on one
  // origin; its pages and components (src/) are a client of the API like any other.
  const CONSOLE_PAGES_MAY_IMPORT = [
    '@better-compute/core',
    '@better-compute/events',
    '@better-compute/client',
    '@better-compute/console-kit',
  ];
  it('import only the client side of ours', () => {
    const crossings: string[] = [];
    for (const file of sourceFiles(join(root, 'apps', 'console', 'src'))) {
      for (const { specifier } of importsOf(file)) {
        if (specifier.startsWith('.') || specifier.startsWith('node:')) continue;
        const target = packageOf(specifier);
        if (OURS.includes(target) && !CONSOLE_PAGES_MAY_IMPORT.includes(target))
          crossings.push(`${relative(root, file)} imports ${specifier}`);
      }
    }
    expect(crossings).toEqual([]);
  });
});

/** The part of a package a file belongs to: its folder under src/, or the file itself at the top. */
const partOf = (pathInSrc: string) => pathInSrc.split('/')[0]!;

/** The top-level source files of a package's src/, but the ones named. */
const topLevelFilesBut = (pkg: string, but: string[]) =>
  readdirSync(join(packagesDir, pkg, 'src')).filter((name) => SOURCE.test(name) && !but.includes(name));

/**
 * What each folder of a package's src/ may import of the package's other folders and top-level
 * files (docs/architecture.md). Every folder has a rule: a new folder fails here until it states its
 * place. A top-level file with no rule (an entry point, the assembly) may import anything.
 */
const FOLDER_RULES: Record<string, Record<string, readonly string[]>> = {
  'better-compute': {
    // The assembly and the package's entry put everything together.
    'compute.ts': ['*'],
    'index.ts': ['*'],
    'types.ts': ['config', 'http', 'live'],
    config: ['compute.ts'],
    db: [],
    http: ['db'],
    workers: ['db', 'http'],
    pki: ['gateway'],
    modules: ['config', 'db', 'pki', 'workers'],
    audit: ['db', 'http', 'pki', 'workers'],
    live: ['db', 'http', 'modules'],
    gateway: ['db', 'modules', 'pki'],
    tunnels: ['gateway', 'http', 'live', 'modules'],
    sim: ['compute.ts', 'db', 'modules'],
    host: ['compute.ts', 'config', 'gateway', 'live', 'pki', 'sim', 'tunnels'],
    mcp: ['http'],
    cli: ['audit', 'config', 'host', 'mcp', 'modules', 'pki', 'sim'],
  },
  daemon: {
    runtimes: ['state.ts'],
    streams: ['runtimes'],
    // Bare metal's machine side: BMC drivers and the provisioning network; the ledger's process
    // identity (runtimes/ledger.ts) is all it takes from the runtimes.
    metal: ['runtimes'],
  },
  iam: {
    // Areas and the CLI use the library's files, never the assembly (iam.ts), the request
    // pipeline (handler.ts) or the entry; the handler and iam.ts import the areas.
    areas: topLevelFilesBut('iam', ['iam.ts', 'handler.ts', 'index.ts']),
    cli: topLevelFilesBut('iam', ['iam.ts', 'handler.ts', 'index.ts']),
  },
  core: {
    // The method table is written in the core's own terms (groups, ids, the contract).
    methods: ['*'],
    // The quorum is pure functions over bytes: the error type, ids, the shared RFC 6962 tree, the
    // command envelope a batch's command is checked against, and the strict SPKI key reader.
    quorum: ['command-envelope.ts', 'errors.ts', 'ids.ts', 'merkle.ts', 'spki.ts'],
    // Release manifests are pure functions too: the error type, the project's pin form for key ids
    // (command-root.ts's publicKeyPin), and the strict SPKI key reader.
    release: ['command-root.ts', 'errors.ts', 'spki.ts'],
  },
};

/**
 * Files of the server any part may import: contracts with nothing behind them that could reach
 * back (the module contract, the node-stream contract the tunnel route, the gateway and the
 * tunnels module share, and the deployment's types).
 */
const SERVER_CONTRACTS = [
  'modules/define-module.ts',
  'gateway/node-streams.ts',
  'http/openapi.ts',
  'types.ts',
];

/** Every relative import of the files under `dir`, resolved to a path in `src` (`x.js` is `x.ts`). */
function localImports(src: string, dir: string) {
  return sourceFiles(dir).flatMap((file) =>
    importsOf(file)
      .filter(({ specifier }) => specifier.startsWith('.'))
      .map(({ specifier }) => ({
        file: relative(src, file),
        specifier,
        target: relative(src, resolveFile(file, specifier) ?? resolve(dirname(file), specifier)),
      })),
  );
}

const foldersOf = (dir: string) =>
  existsSync(dir)
    ? readdirSync(dir, { withFileTypes: true })
        .filter((entry) => entry.isDirectory())
        .map((entry) => entry.name)
    : [];

describe('which folder of a package imports which', () => {
  const withFolders = packageDirs.filter((name) => foldersOf(join(packagesDir, name, 'src')).length > 0);

  it.each(withFolders)('every folder of %s/src has a rule', (pkg) => {
    const missing = foldersOf(join(packagesDir, pkg, 'src'))
      .filter((folder) => !(folder in (FOLDER_RULES[pkg] ?? {})))
      .map(
        (folder) =>
          `packages/${pkg}/src/${folder}/ has no rule: add it to FOLDER_RULES in test/architecture.test.ts (what it may import) and describe it in docs/architecture.md`,
      );
    expect(missing).toEqual([]);
  });

  it.each(Object.keys(FOLDER_RULES))('the folders of %s/src import only what their rule allows', (pkg) => {
    const src = join(packagesDir, pkg, 'src');
    const rules = FOLDER_RULES[pkg]!;
    const contracts = pkg === 'better-compute' ? SERVER_CONTRACTS : [];
    const crossings: string[] = [];
    for (const [from, allowed] of Object.entries(rules)) {
      if (allowed.includes('*')) continue;
      const dir = join(src, from);
      const imports = from.includes('.')
        ? localImports(src, src).filter((i) => i.file === from)
        : localImports(src, dir);
      for (const { file, specifier, target } of imports) {
        const to = partOf(target);
        if (to === from || contracts.includes(target) || allowed.includes(to)) continue;
        crossings.push(
          `packages/${pkg}/src/${file} imports ${specifier} (${from} may import ${allowed.join(', ') || 'no other part'})`,
        );
      }
    }
    expect(crossings).toEqual([]);
  });
});

describe('the modules of the server', () => {
  const src = join(packagesDir, 'better-compute', 'src');
  const modulesDir = join(src, 'modules');
  const modules = foldersOf(modulesDir);

  /**
   * Which modules each module uses (imports any file of). Modules are one layer and call one
   * another's exported functions; what none does is query another's tables (below). The one pair
   * that uses each other: a workflow queues commands, and a command that ends wakes its workflow.
   */
  const MODULE_USES: Record<string, string[]> = {
    events: [],
    system: [],
    webhooks: [],
    confirmations: [],
    releases: [],
    secrets: [],
    profiles: ['fleet', 'secrets', 'vps'],
    metal: ['fleet', 'commands', 'workflows'],
    rollouts: ['fleet', 'releases', 'workflows'],
    fleet: ['events'],
    commands: ['fleet', 'workflows'],
    batches: ['commands', 'fleet', 'metal'],
    workflows: ['commands', 'fleet'],
    'ssh-certs': ['commands', 'fleet'],
    vps: ['commands', 'fleet', 'workflows'],
    tunnels: ['commands', 'fleet', 'ssh-certs', 'vps'],
    sandboxes: ['commands', 'fleet', 'secrets', 'ssh-certs', 'tunnels', 'vps', 'workflows'],
    'fleet-config': ['fleet', 'provider-accounts', 'sandboxes', 'vps'],
    'provider-accounts': ['fleet', 'secrets'],
  };

  it('every module has a line in the map, and the map is what the code does', () => {
    const missing = modules
      .filter((name) => !(name in MODULE_USES))
      .map(
        (name) =>
          `modules/${name}/ has no line in MODULE_USES (test/architecture.test.ts): add which modules it uses`,
      );
    expect(missing).toEqual([]);
    const uses = new Map<string, Set<string>>(modules.map((name) => [name, new Set()]));
    for (const { file, target } of localImports(src, modulesDir)) {
      const [, from] = file.split('/');
      const [top, to, rest] = target.split('/');
      if (top === 'modules' && rest !== undefined && to !== from) uses.get(from!)?.add(to!);
    }
    const actual = Object.fromEntries(modules.map((name) => [name, [...uses.get(name)!].sort()]));
    const declared = Object.fromEntries(modules.map((name) => [name, [...(MODULE_USES[name] ?? [])].sort()]));
    expect(actual).toEqual(declared);
  });

  /**
   * Files of a module that code outside modules/ may import beside its index.ts, and why: the
   * command line checks a --selector with the server's own parser, and loading the fleet's index
   * (its controller, the database driver) would cost a command some 600 ms.
   */
  const MORE_ENTRIES = ['modules/fleet/reservations/selector.ts'];

  it("outside modules/, a module is reached only through its index.ts (compute.ts takes each module's module.ts)", () => {
    const crossings = localImports(src, src)
      .filter(({ file, target }) => !file.startsWith('modules/') && target.startsWith('modules/'))
      .filter(({ target }) => !SERVER_CONTRACTS.includes(target) && !MORE_ENTRIES.includes(target))
      .filter(({ file, target }) => {
        const [, , inModule] = target.split('/');
        return !(inModule === 'index.ts' || (file === 'compute.ts' && inModule === 'module.ts'));
      })
      .map(
        ({ file, specifier }) =>
          `${file} imports ${specifier}: import the module's index.ts (add the export there)`,
      );
    expect(crossings).toEqual([]);
  });
});

describe('who queries which table', () => {
  const src = join(packagesDir, 'better-compute', 'src');

  /** The part a server file speaks for: its module (`modules/fleet`), or its top-level folder. */
  const ownerPart = (pathInSrc: string) => {
    const [top, second, third] = pathInSrc.split('/');
    return top === 'modules' && third !== undefined ? `modules/${second}` : top!;
  };

  /** Every table of the `compute` schema, and the part whose migrations create it. */
  const owners = new Map<string, string>();
  for (const file of sourceFiles(src).filter((path) => path.endsWith('/migrations.ts'))) {
    for (const match of readFileSync(file, 'utf8').matchAll(
      /create\s+table\s+(?:if\s+not\s+exists\s+)?compute\.(\w+)/gi,
    ))
      owners.set(match[1]!, ownerPart(relative(src, file)));
  }

  /**
   * The named shared kernel (docs/architecture.md, "Who queries which table"): the tables a part
   * other than their owner may query, and why. Kept short on purpose.
   */
  const SHARED_KERNEL: {
    name: string;
    tables: (table: string) => boolean;
    by: (file: string) => boolean;
    writes: boolean;
  }[] = [
    {
      // The outbox, the audit log, idempotency keys, jobs and leases (src/db): every part writes
      // its events, audit entries and jobs in its own transaction.
      name: 'the foundation',
      tables: (table) => owners.get(table) === 'db',
      by: () => true,
      writes: true,
    },
    {
      // A node's free room is every instance and live sandbox on it, counted in one statement
      // under the pool's lock that every create takes; the runtimes a node can run are its
      // session's capabilities, read in the same statement.
      name: 'room on a node',
      tables: (table) => ['nodes', 'pools', 'node_sessions', 'instances', 'sandboxes'].includes(table),
      by: (file) => file === 'modules/vps/placement.ts' || file === 'modules/sandboxes/placement.ts',
      writes: false,
    },
    {
      // The simulator's invariants check the store itself, after the fact: an oracle that read
      // through the modules' own functions would share their bugs.
      name: "the simulator's oracle",
      tables: () => true,
      by: (file) => file.startsWith('sim/'),
      writes: false,
    },
  ];

  /** Strips comments, so prose that names a table is not taken for a query. */
  const code = (text: string) =>
    text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1');

  /** Queries on `compute.*` and `iam.*` tables, through Kysely or in raw SQL. */
  function queriesOf(text: string): { table: string; schema: string; write: boolean; how: string }[] {
    const found: { table: string; schema: string; write: boolean; how: string }[] = [];
    const kysely =
      /\b(selectFrom|updateTable|insertInto|replaceInto|deleteFrom|mergeInto|innerJoin|leftJoin|rightJoin|fullJoin|crossJoin|table)\(\s*(\[[^\]]*\]|['"`][^'"`]*['"`])/g;
    for (const match of text.matchAll(kysely)) {
      for (const name of match[2]!.matchAll(/\b(compute|iam)\.(\w+)/g))
        found.push({
          schema: name[1]!,
          table: name[2]!,
          write: !/Join$|^selectFrom$/.test(match[1]!),
          how: `${match[1]}('${name[0]}')`,
        });
    }
    const raw =
      /\b(delete\s+from|from|join|update|into|truncate(?:\s+table)?|lock\s+table|alter\s+table)\s+(compute|iam)\.(\w+)/gi;
    for (const match of text.matchAll(raw)) {
      const verb = match[1]!.toLowerCase().replace(/\s+/g, ' ');
      found.push({
        schema: match[2]!,
        table: match[3]!,
        write: !(verb === 'from' || verb === 'join'),
        how: `${verb} ${match[2]}.${match[3]}`,
      });
    }
    return found;
  }

  it('knows who owns each table: every compute table is created by one part', () => {
    expect(owners.size).toBeGreaterThan(30);
    expect(owners.get('nodes')).toBe('modules/fleet');
    expect(owners.get('events')).toBe('db');
    expect(owners.get('gateway_replicas')).toBe('gateway');
  });

  it("a part queries another's tables only through that part's exports, or in the named shared kernel", () => {
    const breaches: string[] = [];
    for (const file of sourceFiles(src)) {
      const path = relative(src, file);
      // Migrations name other parts' tables in foreign keys and triggers: that is the schema, not a query.
      if (path.endsWith('/migrations.ts')) continue;
      const part = ownerPart(path);
      for (const query of queriesOf(code(readFileSync(file, 'utf8')))) {
        const owner = query.schema === 'iam' ? 'better-iam' : (owners.get(query.table) ?? 'no migration');
        if (owner === part) continue;
        const kernel = SHARED_KERNEL.find(
          (k) =>
            query.schema === 'compute' && k.tables(query.table) && k.by(path) && (k.writes || !query.write),
        );
        if (kernel) continue;
        breaches.push(
          `${path}: ${query.how} is ${owner}'s table; call (or add) a function ${owner} exports, or name a shared kernel in docs/architecture.md`,
        );
      }
    }
    expect(breaches).toEqual([]);
  });

  it('docs/architecture.md names every part of the shared kernel', () => {
    const doc = readFileSync(join(root, 'docs', 'architecture.md'), 'utf8');
    expect(SHARED_KERNEL.map((k) => k.name).filter((name) => !doc.includes(name))).toEqual([]);
  });
});

describe('docs/architecture.md', () => {
  const doc = readFileSync(join(root, 'docs', 'architecture.md'), 'utf8');
  it('names every package, folder and module there is', () => {
    const named = [
      ...packageDirs.map((name) => `packages/${name}`),
      ...readdirSync(join(root, 'apps')).map((name) => `apps/${name}`),
      'bench/',
      'scripts/',
      'test/',
      ...Object.entries(FOLDER_RULES).flatMap(([pkg, rules]) =>
        Object.keys(rules)
          .filter((part) => !part.includes('.'))
          .map((folder) => (pkg === 'better-compute' ? `\`${folder}/\`` : `${folder}/`)),
      ),
      ...foldersOf(join(packagesDir, 'better-compute', 'src', 'modules')).map((name) => `\`${name}\``),
    ];
    expect(named.filter((name) => !doc.includes(name))).toEqual([]);
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
