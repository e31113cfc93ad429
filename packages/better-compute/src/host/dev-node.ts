/**
 * `dev --node`: one real `bcd` on this machine beside the simulated ones. It joins like any
 * machine (a join token handed to `bcd join` on standard input, a join request that dev approves),
 * then `bcd run` holds its session to dev's gateway and reports this machine's CPUs, memory, disks
 * and NICs. Its state directory is `bcd/` in dev's (`.better-compute/bcd/`; a temporary one with
 * --memory), so a restarted dev brings back the same node.
 *
 * Nothing of it outlives dev: bcd runs `--ephemeral`, so its VMs and sandboxes stop with it and it
 * removes their mounts, loop devices, namespaces and rules (and sweeps what a killed run left when
 * it starts); it runs in a process group of its own with a pipe from dev as its standard input, so
 * a Ctrl-C reaches dev alone, which stops it and waits, and a dev that dies takes it along. The
 * break-glass SSH files go to `bcd/ssh/` rather than /etc/ssh/bcd.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { ComputeInstance } from '../types.js';

export interface DevNodeOptions {
  compute: ComputeInstance;
  url: string;
  token: string;
  /** Where bcd keeps its state; null for a temporary directory. */
  stateDir: string | null;
  signal: AbortSignal;
  log: (line: string) => void;
  /** Whether a missing guest image is built in the background for the node's VPS pool. */
  buildGuestImage: boolean;
  /** dev's own state directory, where the guest image's build log goes. */
  devDir: string;
}

/** The installed `bcd` start-up file. */
export function bcdBin(): string {
  // The CLI runs this from a CommonJS bundle (__filename) and tests from ES modules (the cwd's packages).
  const require = createRequire(
    typeof __filename === 'string' ? __filename : join(process.cwd(), 'index.js'),
  );
  return join(dirname(require.resolve('@better-compute/daemon/package.json')), 'bin', 'bcd.cjs');
}

/** How long a command bcd is running may finish when dev stops, before it is handed back. */
const STOP_GRACE_SECONDS = '2';

export async function startDevNode(
  options: DevNodeOptions,
): Promise<{ nodeId: string; poolId: string; stop(): Promise<void>; stopped: Promise<void> }> {
  const { compute, token, log } = options;
  async function api<T = unknown>(method: string, body: Record<string, unknown>): Promise<T> {
    const response = await compute.handler(
      new Request(`http://localhost${compute.config.basePath}/${method.replaceAll('.', '/')}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify(body),
      }),
    );
    const answer = (await response.json()) as { data?: T; error?: { code: string; message: string } };
    if (answer.error) throw new Error(`${method}: ${answer.error.code}: ${answer.error.message}`);
    return answer.data as T;
  }
  const stateDir = options.stateDir ?? mkdtempSync(join(tmpdir(), 'bcd-dev-'));
  const bin = bcdBin();
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? tmpdir(),
  };
  // Where bcd puts its VMs' sockets (runtime-dir.ts in the daemon) follows the same settings as bcd's own.
  for (const name of ['BCD_RUNTIME_DIR', 'XDG_RUNTIME_DIR'] as const)
    if (process.env[name]) env[name] = process.env[name]!;
  const pools = await api<{ items: { id: string; name: string; class: string }[] }>('pools.list', {
    limit: 500,
  });
  let pool = pools.items.find((p) => p.name === 'this-machine');
  if (!pool) {
    const sites = await api<{ items: { id: string; name: string }[] }>('sites.list', { limit: 500 });
    const siteId =
      sites.items.find((s) => s.name === 'local')?.id ??
      (await api<{ id: string }>('sites.create', { name: 'local', region: 'local' })).id;
    // A VPS pool: this machine runs instances and sandboxes for acme.
    pool = await api<{ id: string; name: string; class: string }>('pools.create', {
      siteId,
      name: 'this-machine',
      class: 'vps',
      driver: 'bcd',
    });
    await api('pools.offer', { poolId: pool!.id, offerTenantId: 'acme' });
  }
  const poolId = pool!.id;
  if (!existsSync(join(stateDir, 'node.json'))) {
    const joinToken = await api<{ token: string; joinToken: { id: string } }>('joinTokens.create', {
      poolId,
      uses: 1,
      lifetimeSeconds: 600,
      description: 'dev --node',
    });
    const joining = spawn(
      process.execPath,
      [bin, 'join', '--url', options.url, '--token-file', '-', '--state-dir', stateDir, '--wait'],
      {
        env,
        stdio: ['pipe', 'ignore', 'pipe'],
      },
    );
    // The token goes through standard input, never argv.
    joining.stdin!.end(`${joinToken.token}\n`);
    let errors = '';
    joining.stderr!.on('data', (chunk: Buffer) => (errors += chunk.toString('utf8')));
    const exited = new Promise<number | null>((resolve) => joining.on('exit', resolve));
    const approved = (async () => {
      for (let i = 0; i < 300; i += 1) {
        const pending = await api<{ items: { id: string; joinTokenId: string }[] }>('joinRequests.list', {
          state: 'pending',
          poolId,
        });
        const request = pending.items.find((r) => r.joinTokenId === joinToken.joinToken.id);
        if (request)
          return api('joinRequests.approve', { joinRequestId: request.id, labels: { machine: 'local' } });
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      throw new Error('bcd join sent no join request');
    })();
    await approved;
    if ((await exited) !== 0) throw new Error(`bcd join failed: ${errors.trim().split('\n').at(-1) ?? ''}`);
  }
  const running: ChildProcess = spawn(
    process.execPath,
    [
      bin, 'run', '--state-dir', stateDir, '--ephemeral', '--stop-grace', STOP_GRACE_SECONDS,
      '--ssh-dir', join(stateDir, 'ssh'),
      '--scripts-dir', devScriptsDir(bin, stateDir),
      // This start's address first: a dev on another port than the join's still holds the node.
      '--url', options.url,
    ],
    // Its own process group: a Ctrl-C in dev's terminal reaches dev, which stops bcd and waits;
    // standard input a pipe from dev, whose end (dev gone, even by SIGKILL) stops bcd too.
    { env, stdio: ['pipe', 'ignore', 'pipe'], detached: true },
  ); // prettier-ignore
  running.stdin!.on('error', () => {});
  let said = '';
  running.stderr!.on('data', (chunk: Buffer) => {
    said = (said + chunk.toString('utf8')).slice(-4000);
    for (const line of chunk.toString('utf8').split('\n'))
      if (/session up|refused|swept|failed|could not|stopping its|started again/.test(line)) log(line);
  });
  const nodeId = (JSON.parse(readFileSync(join(stateDir, 'node.json'), 'utf8')) as { nodeId: string }).nodeId;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    running.on('exit', (code, signal) => resolve({ code, signal })),
  );
  let vps: { stopped: Promise<void> } | undefined;
  let stopping: Promise<void> | undefined;
  void exited.then((end) => {
    if (!stopping)
      log(
        `this machine: bcd exited unasked (${end.signal ?? `status ${end.code}`}): ${said.trim().split('\n').at(-1) ?? ''}; restart dev to start it again`,
      );
  });
  const stop = () =>
    (stopping ??= (async () => {
      if (running.exitCode === null && running.signalCode === null) {
        log('this machine: stopping bcd; its VMs and sandboxes stop with it');
        running.kill('SIGTERM');
      }
      const end = await exited;
      running.stdin!.destroy();
      // A bcd that did not stop by itself (killed, or it failed) left its workloads: swept here.
      if (end.code !== 0) {
        log(`this machine: bcd ended ${end.signal ?? `with ${end.code}`}; sweeping what it left`);
        await sweepState(bin, stateDir, env, log);
      }
      await vps?.stopped;
      // A temporary state directory (--memory) goes with the store it belonged to.
      if (!options.stateDir) rmSync(stateDir, { recursive: true, force: true });
      log('this machine: bcd stopped; nothing of it is left running');
    })());
  const stopped = new Promise<void>((resolve) => {
    const onAbort = () => void stop().then(resolve, resolve);
    if (options.signal.aborted) onAbort();
    else options.signal.addEventListener('abort', onAbort, { once: true });
  });
  if (pool!.class === 'vps') {
    const { prepareDevVps } = await import('./dev-vps.js');
    vps = await prepareDevVps({
      api,
      poolId,
      signal: options.signal,
      log,
      build: options.buildGuestImage,
      logDir: options.devDir,
    }).catch((error: Error) => {
      log(`this machine: preparing its VPS pool failed: ${error.message}`);
      return undefined;
    });
  }
  return { nodeId, poolId, stop, stopped };
}

/** `bcd sweep`: what a bcd that did not stop by itself left on the machine, removed. */
function sweepState(
  bin: string,
  stateDir: string,
  env: Record<string, string>,
  log: (line: string) => void,
): Promise<void> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, 'sweep', '--state-dir', stateDir], {
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let said = '';
    child.stderr!.on('data', (chunk: Buffer) => (said += chunk.toString('utf8')));
    child.on('error', (error) => {
      log(`this machine: bcd sweep could not run: ${error.message}`);
      resolve();
    });
    child.on('close', (code) => {
      for (const line of said.trim().split('\n').filter(Boolean).slice(-5)) log(line);
      if (code !== 0) log(`this machine: bcd sweep ended with ${code}`);
      resolve();
    });
  });
}

/**
 * The scripts dev's node runs: the daemon's maintenance scripts without its power scripts, so an
 * approved power-off batch (the README's quorum drill) fails on this machine instead of powering
 * it off.
 */
function devScriptsDir(bin: string, stateDir: string): string {
  const shipped = join(dirname(bin), '..', 'scripts');
  const dir = join(stateDir, 'scripts');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (const name of readdirSync(shipped))
    if (name.endsWith('.sh') && !name.startsWith('power-'))
      copyFileSync(join(shipped, name), join(dir, name));
  return dir;
}
