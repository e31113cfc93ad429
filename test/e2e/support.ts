/** Running the real binaries, as a person would, for the end-to-end suites. */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';

export const root = join(import.meta.dirname, '..', '..');
export const computeBin = join(root, 'packages', 'better-compute', 'bin', 'better-compute.cjs');
export const iamBin = join(root, 'packages', 'iam', 'bin', 'better-iam.mjs');

export interface RunResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a binary to completion with exactly the environment given (plus PATH). */
export function runBin(
  bin: string,
  args: string[],
  options: { cwd: string; env: Record<string, string>; input?: string },
): RunResult {
  const result = spawnSync(process.execPath, [bin, ...args], {
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? '', ...options.env },
    input: options.input ?? '',
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** A free loopback port. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface RunningServer {
  output(): string;
  /** Sends SIGTERM and resolves with the exit code. */
  stop(): Promise<number | null>;
}

/** Starts a long-running command and waits until its output matches `ready`. */
export async function startBin(
  bin: string,
  args: string[],
  options: { cwd: string; env: Record<string, string>; ready: RegExp; timeoutMs?: number },
): Promise<RunningServer> {
  const child = spawn(process.execPath, [bin, ...args], {
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? '', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  while (!options.ready.test(output)) {
    if (child.exitCode !== null) throw new Error(`exited ${child.exitCode} before it was ready:\n${output}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`not ready in time:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    output: () => output,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      return exited;
    },
  };
}

/**
 * Runs the compute binary as a token holder against a running server, without blocking this
 * process (a server started in it keeps answering), killed after `timeoutMs`.
 */
export function runCompute(
  args: string[],
  options: { cwd: string; url: string; token: string; timeoutMs?: number },
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [computeBin, ...args], {
      cwd: options.cwd,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: options.cwd,
        BETTER_IAM_HOME: join(options.cwd, 'iam'),
        BETTER_COMPUTE_URL: options.url,
        BETTER_COMPUTE_TOKEN: options.token,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
    child.once('error', reject);
    child.once('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

interface DevAccount {
  email: string;
  password: string;
  apiKey: string;
}

export interface DevServer {
  server: RunningServer;
  /** The server's origin, `http://127.0.0.1:PORT`. */
  url: string;
  /** The accounts `dev --memory` wrote to `.better-compute/dev-memory.json`. */
  dev: Record<'rootAdmin' | 'acmeAdmin' | 'acmeMember', DevAccount>;
}

/** `better-compute dev --memory --port 0 [args]` in `cwd`, once its output matches `ready`. */
export async function startDev(
  cwd: string,
  args: string[],
  options: { ready?: RegExp; timeoutMs?: number; env?: Record<string, string> } = {},
): Promise<DevServer> {
  const server = await startBin(computeBin, ['dev', '--memory', '--port', '0', ...args], {
    cwd,
    env: { HOME: cwd, ...options.env },
    ready: options.ready ?? /\ntry: BETTER_COMPUTE_URL=\S+/,
    timeoutMs: options.timeoutMs ?? 50_000,
  });
  const url = /better-compute dev: (http:\/\/127\.0\.0\.1:\d+)\/api\/compute\n/.exec(server.output())![1]!;
  const dev = JSON.parse(readFileSync(join(cwd, '.better-compute', 'dev-memory.json'), 'utf8'));
  return { server, url, dev };
}
