/**
 * `dev`: a local control plane in one process. It uses the configuration when one is found, else
 * PGlite under `.better-compute/dev/` (or in memory with --memory); applies migrations; on a new
 * store creates the root administrator, a tenant `acme` with an administrator and a member, and an
 * API key for each, and writes them to `.better-compute/dev.json` (mode 0600; `dev-memory.json` with
 * --memory, so a throwaway store never replaces a persistent one's credentials). Prints the URL and
 * who those accounts are, never their passwords or keys: a secret reaches the output only when one
 * asks for it (docs/decisions/dev-credentials.md). Runs until the abort signal.
 */
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rename, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { ComputeError } from '@better-compute/core';
import { betterCompute } from '../compute.js';
import { findConfigFile, loadConfig } from '../config/load-config.js';
import type { ComputeConfig } from '../config/define-config.js';
import type { SimulatedMachine } from '../sim/fleet-runner.js';
import type { AccessEntry } from './access-log.js';
import { serve } from './serve.js';

interface SavedAccount {
  tenantId?: string;
  email?: string;
  role?: string;
  apiKey?: string;
  password?: string;
  /** A session signed in at this start: what a person's credential is, where an API key is refused. */
  sessionToken?: string;
}

type SavedDev = Partial<Record<'rootAdmin' | 'acmeAdmin' | 'acmeMember', SavedAccount>>;

const ACCOUNTS = ['rootAdmin', 'acmeAdmin', 'acmeMember'] as const;

/** One line per account: its name in dev.json, tenant, email and role; never its secrets. */
function accountLines(saved: SavedDev): string[] {
  const rows = ACCOUNTS.flatMap((name) => {
    const account = saved[name];
    return account ? [[name, account.tenantId ?? '', account.email ?? '', account.role ?? '']] : [];
  });
  const widths = [0, 1, 2].map((i) => Math.max(...rows.map((row) => row[i]!.length)));
  return rows.map((row) => `  ${row.map((cell, i) => (i < 3 ? cell.padEnd(widths[i]!) : cell)).join('  ')}`);
}

/**
 * Signs every account in again and keeps the session beside its API key in dev.json: some calls
 * take a person's session and never an API key (`sandbox exec`, a second factor's set-up), and a
 * session lasts hours, so each start writes fresh ones.
 */
async function refreshSessions(
  iam: NonNullable<Awaited<ReturnType<typeof betterCompute>>['embeddedIam']>,
  devFile: string,
  saved: SavedDev,
  log: (line: string) => void,
): Promise<SavedDev> {
  const file = (await readJsonFile<Record<string, unknown>>(devFile)) ?? {};
  const next: SavedDev = { ...saved };
  for (const name of ACCOUNTS) {
    const account = saved[name];
    if (!account?.email || !account.password || !account.tenantId) continue;
    try {
      const { token } = await iam.signIn(account.email, account.password, account.tenantId);
      next[name] = { ...account, sessionToken: token };
    } catch (error) {
      log(
        `dev: could not sign ${account.email} in: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }
  await writePrivateFile(
    devFile,
    `${JSON.stringify({ ...file, ...next }, null, 2)}
`,
  );
  return next;
}

export interface DevOptions {
  cwd: string;
  env: Record<string, string | undefined>;
  port: number;
  host?: string;
  memory: boolean;
  /** How many simulated machines join (through join tokens and requests) and heartbeat until stopped. */
  sim?: number;
  /** Start one real `bcd` on this machine, joined through a join request dev approves. */
  node?: boolean;
  /** dev's state directory (relative to cwd); `.better-compute` when not given. */
  stateDir?: string;
  /** Serve the web console on dev's origin (apps/console, docs/console.md); the CLI's dev does by default. */
  console?: boolean;
  /** Run the console in Next.js's development mode (hot reload) instead of its production build. */
  consoleDev?: boolean;
  signal: AbortSignal;
  log: (line: string) => void;
  /** Told one entry per API request (the CLI's dev writes them as text lines by default). */
  accessLog?: ((entry: AccessEntry) => void) | undefined;
  onListening?: (url: string) => void;
}

const DEV_DIR = '.better-compute';

/** A JSON file this host wrote, or null when it is missing or unreadable. */
async function readJsonFile<T>(path: string): Promise<T | null> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as T;
  } catch {
    return null;
  }
}

async function writePrivateFile(path: string, content: string): Promise<void> {
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, content, { mode: 0o600 });
  await rename(temporary, path);
}

/**
 * The dev store's own deployment secret (it seals TOTP seeds): made once beside the store, 0600,
 * never printed; a --memory store gets a fresh one that dies with it.
 */
async function devSecret(stateDir: string, memory: boolean): Promise<string> {
  if (memory) return randomBytes(32).toString('base64url');
  const path = join(stateDir, 'dev-secret');
  const existing = await readFile(path, 'utf8').catch(() => '');
  if (existing.trim()) return existing.trim();
  const secret = randomBytes(32).toString('base64url');
  await writePrivateFile(path, `${secret}\n`);
  return secret;
}

export async function startDev(options: DevOptions): Promise<void> {
  const stateDir = options.stateDir ? resolve(options.cwd, options.stateDir) : join(options.cwd, DEV_DIR);
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  // What dev starts beside its server (the real node) and must see stopped before dev returns.
  const stopping: Promise<void>[] = [];
  const configFile = findConfigFile({ cwd: options.cwd, env: options.env });
  let config: ComputeConfig;
  if (configFile) {
    config = (await loadConfig({ cwd: options.cwd, env: options.env })).config;
  } else {
    config = {
      database: options.memory ? 'pglite:memory' : `pglite:${join(stateDir, 'dev')}`,
      secret: options.env.BETTER_COMPUTE_SECRET || (await devSecret(stateDir, options.memory)),
    };
  }
  // dev seals the audit log every minute with its bundle's audit key (docs/audit.md): the bundle
  // devCommandSigner makes below, at the configuration's `pki` or in the state directory. A --memory
  // store's bundle lives in a temporary directory and goes with it, so tunnels, break-glass SSH and
  // sandboxes work there too.
  const memoryPkiDir = options.memory && !config.pki ? await mkdtemp(join(tmpdir(), 'bc-dev-pki-')) : null;
  if (memoryPkiDir) {
    const removeBundle = () => rmSync(memoryPkiDir, { recursive: true, force: true });
    options.signal.addEventListener('abort', removeBundle, { once: true });
    process.once('exit', removeBundle);
  }
  config = {
    ...config,
    audit: { checkpointEverySeconds: 60, ...config.audit },
    // dev's accounts are API keys, which have no second factor: break-glass SSH works with them here.
    breakGlassSsh: { requireMfa: false, ...config.breakGlassSsh },
    pki: memoryPkiDir
      ? join(memoryPkiDir, 'pki.json')
      : config.pki
        ? resolve(options.cwd, config.pki)
        : join(stateDir, 'pki.json'),
  };
  const compute = await betterCompute(config);
  // An in-memory store's accounts die with it: they go to their own file, so a --memory run never
  // overwrites the credentials of the persistent store under .better-compute/dev/.
  const devName = options.memory ? 'dev-memory.json' : 'dev.json';
  const devFile = join(stateDir, devName);
  let created: Awaited<ReturnType<NonNullable<typeof compute.embeddedIam>['bootstrapDev']>>;
  try {
    await compute.migrate();
    const iam = compute.embeddedIam;
    if (!iam) {
      throw new ComputeError(
        'INVALID_CONFIG',
        'dev creates its credentials in the embedded Better IAM, and this configuration sets its own iam',
      );
    }
    created = await iam.bootstrapDev();
  } catch (error) {
    await compute.close().catch(() => {});
    throw error;
  }
  // serve owns the deployment from here and closes it when it stops.
  let announce!: (url: string) => void;
  const listening = new Promise<string>((resolve) => (announce = resolve));
  const { devCommandSigner } = await import('./dev-command-root.js');
  let commandSigner: Awaited<ReturnType<typeof devCommandSigner>>;
  try {
    commandSigner = await devCommandSigner(memoryPkiDir ?? stateDir, {
      secret: config.secret ?? (await devSecret(stateDir, options.memory)),
      pkiPath: config.pki,
      cwd: options.cwd,
    });
  } catch (error) {
    await compute.close().catch(() => {});
    throw error;
  }
  // The web console on dev's own origin, over this deployment and its IAM (docs/console.md).
  const { startDevConsole } = options.console ? await import('./dev-console.js') : {};
  const devConsole = startDevConsole
    ? await startDevConsole({
        compute,
        origin: `http://${options.host ?? '127.0.0.1'}:${options.port}`,
        hotReload: options.consoleDev ?? false,
        log: options.log,
      })
    : null;
  const running = serve({
    compute,
    port: options.port,
    host: options.host ?? '127.0.0.1',
    roles: ['api', 'controllers', 'sinks', 'gateway'],
    commandSigner,
    pages: devConsole?.pages,
    signal: options.signal,
    log: () => {},
    accessLog: options.accessLog,
    onListening: announce,
  });
  const closeConsole = () => devConsole?.close();
  void running.then(closeConsole, closeConsole);
  const url = await Promise.race([listening, running.then(() => '')]);
  if (!url) return running;
  const apiBase = `${url}${compute.config.basePath}`;
  if (created) {
    await writePrivateFile(
      devFile,
      `${JSON.stringify({ url, apiBase, database: compute.database.description, ...created }, null, 2)}\n`,
    );
  }
  let saved = (created ?? (await readJsonFile(devFile))) as SavedDev | null;
  if (saved && compute.embeddedIam)
    saved = await refreshSessions(compute.embeddedIam, devFile, saved, options.log);
  // As the person typed it: relative to where dev runs, or whole when the state is elsewhere.
  const fromCwd = relative(options.cwd, devFile);
  const devPath = fromCwd.startsWith('..') || isAbsolute(fromCwd) ? devFile : fromCwd;
  options.log(`better-compute dev: ${apiBase}`);
  options.log(`store: ${compute.database.description}`);
  if (saved) {
    options.log(`accounts (their passwords, API keys and sessions are in ${devPath}, mode 0600):`);
    for (const line of accountLines(saved)) options.log(line);
  } else {
    options.log(
      `this store's accounts were written to ${devPath} when it was created, and that file is gone; remove ${join(dirname(devPath), 'dev')} to start over`,
    );
  }
  if (options.sim && options.sim > 0) {
    const token = saved?.rootAdmin?.apiKey;
    if (!token) {
      options.log(`--sim ${options.sim}: no root administrator key in ${devPath}, so no simulated machines`);
    } else {
      const { startSimulatedFleet } = await import('../sim/fleet-runner.js');
      // The machines' credentials are kept beside dev.json, so a restart brings back the same fleet.
      const simFile = join(stateDir, 'sim.json');
      const previous = options.memory
        ? []
        : await readJsonFile<{ machines?: SimulatedMachine[] }>(simFile).then(
            (saved) => saved?.machines ?? [],
          );
      try {
        const fleet = await startSimulatedFleet(compute, {
          nodes: options.sim,
          token,
          offerTo: ['acme'],
          machines: previous,
        });
        if (!options.memory)
          await writePrivateFile(simFile, `${JSON.stringify({ machines: fleet.machines }, null, 2)}\n`);
        options.signal.addEventListener('abort', () => void fleet.stop(), { once: true });
        options.log(
          `simulated fleet: ${fleet.nodeIds.length} machine(s) in pool ${fleet.poolId} (sim-gpu, offered to acme), heartbeating until stopped`,
        );
        // A VPS pool of simulated machines beside it: instances there run in the sim runtime.
        const vpsFile = join(stateDir, 'sim-vps.json');
        const vps = await startSimulatedFleet(compute, {
          nodes: Math.min(options.sim, 4),
          token,
          seed: 2,
          poolName: 'sim-vps',
          poolClass: 'vps',
          withoutGpus: true,
          offerTo: ['acme'],
          machines: options.memory
            ? []
            : await readJsonFile<{ machines?: SimulatedMachine[] }>(vpsFile).then(
                (saved) => saved?.machines ?? [],
              ),
        });
        if (!options.memory)
          await writePrivateFile(vpsFile, `${JSON.stringify({ machines: vps.machines }, null, 2)}\n`);
        options.signal.addEventListener('abort', () => void vps.stop(), { once: true });
        options.log(
          `simulated VPS pool: ${vps.nodeIds.length} machine(s) in pool ${vps.poolId} (sim-vps, offered to acme); add flavors with better-compute flavors create --pool ${vps.poolId}`,
        );
      } catch (error) {
        options.log(
          `--sim ${options.sim}: the simulated machines could not join: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
    }
  }
  if (options.node) {
    const token = saved?.rootAdmin?.apiKey;
    if (!token) options.log(`--node: no root administrator key in ${devPath}, so no real node`);
    else {
      const { startDevNode } = await import('./dev-node.js');
      try {
        const node = await startDevNode({
          compute,
          url,
          token,
          stateDir: options.memory ? null : join(stateDir, 'bcd'),
          devDir: stateDir,
          signal: options.signal,
          log: options.log,
          buildGuestImage: options.env.BETTER_COMPUTE_DEV_GUEST_IMAGE !== 'off',
        });
        stopping.push(node.stopped);
        options.log(`this machine: node ${node.nodeId} (a real bcd, in pool this-machine, ${node.poolId})`);
      } catch (error) {
        options.log(`--node: bcd could not join: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  }
  if (devConsole) options.log(devConsole.listening(url));
  // The key is read from the file by the shell, so it is not printed here or echoed by a terminal.
  options.log(
    `try: BETTER_COMPUTE_URL=${url} BETTER_COMPUTE_TOKEN="$(node -p "require('${isAbsolute(devPath) ? devPath : `./${devPath}`}').acmeMember.apiKey")" npx better-compute api system.whoami`,
  );
  options.onListening?.(url);
  // Ctrl-C: dev answers once what it started is stopped too (the node's bcd, its VMs and sandboxes).
  return running.then(async () => {
    await Promise.all(stopping);
  });
}
