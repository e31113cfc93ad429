/**
 * A real server and real daemons for the daemon suites: `better-compute serve` as its own process
 * (so a test can kill it), a deployment in the test process on the same PostgreSQL database for
 * the operator's calls, and `bcd` processes run from the built bundle.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { betterCompute, type ComputeInstance } from '../../better-compute/src/index.js';

export const root = join(import.meta.dirname, '..', '..', '..');
const bcdBin = join(root, 'packages', 'daemon', 'bin', 'bcd.cjs');
const serverBin = join(root, 'packages', 'better-compute', 'bin', 'better-compute.cjs');

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false>,
  timeoutMs = 20_000,
): Promise<T> {
  const started = Date.now();
  let last: unknown;
  while (Date.now() - started < timeoutMs) {
    try {
      const value = await probe();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
}

export interface Proc {
  child: ChildProcess;
  out: string[];
  err: string[];
  exited: Promise<number | null>;
}

/** Runs a Node.js script (or, with `program`, any program) with a small environment. */
export function start(command: string, args: string[], env: Record<string, string>, program = false): Proc {
  const child = spawn(program ? command : process.execPath, program ? args : [command, ...args], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const out: string[] = [];
  const err: string[] = [];
  child.stdout!.on('data', (chunk: Buffer) =>
    out.push(...chunk.toString('utf8').split('\n').filter(Boolean)),
  );
  child.stderr!.on('data', (chunk: Buffer) =>
    err.push(...chunk.toString('utf8').split('\n').filter(Boolean)),
  );
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, out, err, exited };
}

export function bcd(args: string[], env: Record<string, string> = {}): Proc {
  return start(bcdBin, args, env);
}

export interface Deployment {
  database: TestDatabase;
  compute: ComputeInstance;
  rootKey: string;
  acmeKey: string;
  call<T = any>(method: string, body: Record<string, unknown>, as?: 'root' | 'acme'): Promise<T>;
  close(): Promise<void>;
}

/** A migrated PostgreSQL database with the dev identities, and the operator's in-process calls. */
export async function deployment(): Promise<Deployment> {
  const database = await createTestDatabase('postgres');
  const compute = await betterCompute({ database, trustedOrigins: [], rateLimit: false }, { log: () => {} });
  await compute.migrate();
  const dev = await compute.embeddedIam!.bootstrapDev();
  const rootKey = dev!.rootAdmin.apiKey;
  const acmeKey = dev!.acmeAdmin?.apiKey ?? dev!.acmeMember.apiKey;
  async function call<T>(
    method: string,
    body: Record<string, unknown>,
    as: 'root' | 'acme' = 'root',
  ): Promise<T> {
    const response = await compute.handler(
      new Request(`http://localhost/api/compute/${method.replaceAll('.', '/')}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${as === 'root' ? rootKey : acmeKey}`,
        },
        body: JSON.stringify({ tenantId: as, ...body }),
      }),
    );
    const answer = (await response.json()) as { data?: T; error?: { code: string; message: string } };
    if (answer.error)
      throw Object.assign(new Error(`${method}: ${answer.error.code}: ${answer.error.message}`), {
        code: answer.error.code,
      });
    return answer.data as T;
  }
  return {
    database,
    compute,
    rootKey,
    acmeKey,
    call,
    async close() {
      await compute.close();
      await database.close();
    },
  };
}

/** `better-compute serve` with every role, as its own process on the deployment's database. */
export async function startServer(
  databaseUrl: string,
  port: number,
  commandRootKeyFile: string,
  env: Record<string, string> = {},
): Promise<Proc> {
  const server = start(serverBin, ['serve', '--port', String(port)], {
    BETTER_COMPUTE_DATABASE_URL: databaseUrl,
    BETTER_COMPUTE_COMMAND_ROOT_KEY_FILE: commandRootKeyFile,
    ...env,
  });
  await until(
    'the server to listen',
    async () => server.err.concat(server.out).some((line) => line.includes('serving')),
    30_000,
  );
  return server;
}

/** Waits until the daemon of `stateDir` says its session with the gateway is up. */
export async function daemonConnected(stateDir: string): Promise<void> {
  const status = join(stateDir, 'status.json');
  await until(
    'the daemon’s session',
    async () => existsSync(status) && JSON.parse(readFileSync(status, 'utf8')).connected === true,
    30_000,
  );
}

/**
 * `bcd join` with a join token (written to `<scratch>/join-token`, as an operator hands it over),
 * into `stateDir`; fails with what bcd said unless it exits 0. Answers the process (its first line
 * of output is the join's JSON).
 */
export async function bcdJoin(
  url: string,
  token: string,
  scratch: string,
  stateDir: string,
  more: string[] = [],
): Promise<Proc> {
  writeFileSync(join(scratch, 'join-token'), `${token}\n`, { mode: 0o600 });
  const joining = bcd([
    'join',
    '--url',
    url,
    '--token-file',
    join(scratch, 'join-token'),
    '--state-dir',
    stateDir,
    ...more,
  ]);
  const code = await joining.exited;
  if (code !== 0) throw new Error(`bcd join exited with ${code}: ${joining.err.join('\n').slice(-500)}`);
  return joining;
}

/**
 * This machine as a node of a new VPS pool offered to acme: `bcd join` with a pre-approved token
 * (written under `scratch`), then, unless `run` is false, `bcd run` until its session is up.
 */
export async function joinVpsNode(
  env: Deployment,
  url: string,
  scratch: string,
  stateDir: string,
  options: { run?: boolean } = {},
): Promise<{ poolId: string; daemon: Proc | null }> {
  const site = await env.call<{ id: string }>('sites.create', { name: 'vms' });
  const pool = await env.call<{ id: string }>('pools.create', { siteId: site.id, name: 'vms', class: 'vps' });
  await env.call('pools.offer', { poolId: pool.id, offerTenantId: 'acme' });
  const token = await env.call<{ token: string }>('joinTokens.create', {
    poolId: pool.id,
    preApproved: true,
  });
  await bcdJoin(url, token.token, scratch, stateDir);
  if (options.run === false) return { poolId: pool.id, daemon: null };
  const daemon = bcd(['run', '--state-dir', stateDir, '--scripts-dir', scratch]);
  await daemonConnected(stateDir);
  return { poolId: pool.id, daemon };
}
