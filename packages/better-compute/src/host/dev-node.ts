/**
 * `dev --node`: one real `bcd` on this machine beside the simulated ones. It joins like any
 * machine (a join token handed to `bcd join` on standard input, a join request that dev approves),
 * then `bcd run` holds its session to dev's gateway and reports this machine's CPUs, memory, disks
 * and NICs. Its state directory is `.better-compute/bcd/` (a temporary one with --memory), so a
 * restarted dev brings back the same node.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
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
}

/** The installed `bcd` start-up file. */
export function bcdBin(): string {
  // The CLI runs this from a CommonJS bundle (__filename) and tests from ES modules (the cwd's packages).
  const require = createRequire(
    typeof __filename === 'string' ? __filename : join(process.cwd(), 'index.js'),
  );
  return join(dirname(require.resolve('@better-compute/daemon/package.json')), 'bin', 'bcd.cjs');
}

export async function startDevNode(
  options: DevNodeOptions,
): Promise<{ nodeId: string; poolId: string; stop(): Promise<void> }> {
  const { compute, token, log } = options;
  async function api<T = any>(method: string, body: Record<string, unknown>): Promise<T> {
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
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? tmpdir() };
  const pools = await api<{ items: { id: string; name: string; class: string }[] }>('pools.list', {
    limit: 500,
  });
  let pool = pools.items.find((p) => p.name === 'this-machine');
  if (!pool) {
    const sites = await api<{ items: { id: string; name: string }[] }>('sites.list', { limit: 500 });
    const siteId =
      sites.items.find((s) => s.name === 'local')?.id ??
      (await api('sites.create', { name: 'local', region: 'local' })).id;
    // A VPS pool: this machine runs instances and sandboxes for acme.
    pool = await api('pools.create', { siteId, name: 'this-machine', class: 'vps', driver: 'bcd' });
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
      [bin, 'join', '--url', options.url, '--token-file', '-', '--state-dir', stateDir],
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
  const running: ChildProcess = spawn(process.execPath, [bin, 'run', '--state-dir', stateDir], {
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  running.stderr!.on('data', (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n'))
      if (line.includes('session up') || line.includes('refused')) log(line);
  });
  const nodeId = (JSON.parse(readFileSync(join(stateDir, 'node.json'), 'utf8')) as { nodeId: string }).nodeId;
  const exited = new Promise<void>((resolve) => running.on('exit', () => resolve()));
  const stop = async () => {
    if (running.exitCode === null) running.kill('SIGTERM');
    await exited;
    // A temporary state directory (--memory) goes with the store it belonged to, and so do the
    // sandboxes its daemon started (they outlive a daemon, not a throwaway store) and their mounts.
    if (!options.stateDir) {
      discardSandboxes(stateDir);
      rmSync(stateDir, { recursive: true, force: true });
    }
  };
  options.signal.addEventListener('abort', () => void stop(), { once: true });
  if (pool!.class === 'vps') {
    const { prepareDevVps } = await import('./dev-vps.js');
    await prepareDevVps({ api, poolId, signal: options.signal, log, build: options.buildGuestImage }).catch(
      (error: Error) => log(`this machine: preparing its VPS pool failed: ${error.message}`),
    );
  }
  return { nodeId, poolId, stop };
}

/** Stops the sandboxes under a daemon's state directory and unmounts what it mounted there. */
function discardSandboxes(stateDir: string): void {
  const sandboxes = join(stateDir, 'sandboxes');
  for (const id of existsSync(sandboxes) ? readdirSync(sandboxes) : []) {
    try {
      const run = JSON.parse(readFileSync(join(sandboxes, id, 'run.json'), 'utf8')) as {
        pid?: number;
        netPid?: number | null;
        monitorPid?: number | null;
      };
      for (const pid of [run.pid, run.netPid, run.monitorPid]) if (pid) process.kill(pid, 'SIGKILL');
    } catch {
      /* not running */
    }
  }
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((point) => point.startsWith(`${stateDir}/`))
    .sort((a, b) => b.length - a.length);
  for (const point of mounts) spawnSync('umount', ['-l', point], { stdio: 'ignore' });
}
