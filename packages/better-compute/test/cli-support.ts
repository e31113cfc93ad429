/**
 * Test support for the CLI suites: a captured CliIO, the CLI in process against a deployment, and a
 * fake compute server on loopback.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { createCli, main, type CliIO } from '../src/cli/index.js';
import { serve } from '../src/index.js';
import type { ComputeInstance } from '../src/types.js';

export interface Captured {
  io: CliIO;
  out: string[];
  err: string[];
}

/** A CliIO that records what a command prints; the environment is only what the test gives. */
export function captureIO(
  env: Record<string, string | undefined> = {},
  extra: Partial<CliIO> = {},
): Captured {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    io: { out: (line) => out.push(line), err: (line) => err.push(line), env, cwd: process.cwd(), ...extra },
  };
}

/**
 * The CLI in process, calling a deployment the test owns: the CLI's close() leaves it open, and
 * `compute()` is read at each command, so the deployment may be made after the CLI.
 */
export function cliLending(compute: () => ComputeInstance) {
  return createCli({
    projectCommands: false,
    loadCompute: async () => {
      const c = compute();
      return { ...c, handler: (request: Request) => c.handler(request), close: async () => undefined };
    },
  });
}

/** A directory beside the suites for a CLI's HOME, removed after the describe block (or file) that makes it. */
export function scratchDirectory(prefix: string): string {
  const scratch = mkdtempSync(join(import.meta.dirname, prefix));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));
  return scratch;
}

/** The real binary, as the test set-up built it. */
const BINARY = join(import.meta.dirname, '..', 'bin', 'better-compute.cjs');

export interface BinaryRun {
  status: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The real binary from `cwd`, with PATH, HOME (`cwd`) and `env` only, so nothing of the user's
 * environment or home is read; its output whole once it exits.
 */
export function runBinary(args: string[], cwd: string, env: Record<string, string>): Promise<BinaryRun> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BINARY, ...args], {
      cwd,
      env: { PATH: process.env.PATH ?? '', HOME: cwd, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/** The error code a failed run printed (`CODE: message` on stderr). */
export const failureCode = (result: BinaryRun) => /^([A-Z_]+):/m.exec(result.stderr)?.[1];

export interface CliRun {
  code: number;
  out: string[];
  err: string[];
}

/**
 * The CLI in process against `compute()` (see cliLending), with `env` and a HOME and IAM home in
 * `scratch`, run from `scratch` so nothing of the checkout or the user's home is read. Each run may
 * add to `env`.
 */
export function cliRunner(compute: () => ComputeInstance, scratch: string, env: Record<string, string> = {}) {
  const cli = cliLending(compute);
  const home = { HOME: scratch, BETTER_IAM_HOME: join(scratch, 'iam') };
  async function run(
    argv: string[],
    more: Record<string, string> = {},
    extra: Partial<CliIO> = {},
  ): Promise<CliRun> {
    const { io, out, err } = captureIO({ ...home, ...env, ...more }, { cwd: scratch, ...extra });
    return { code: await main(argv, cli, io), out, err };
  }
  /** A run as the suites that compare whole outputs read it: `status`, and each stream as one string. */
  async function printed(argv: string[], more: Record<string, string> = {}, extra: Partial<CliIO> = {}) {
    const { code, out, err } = await run(argv, more, extra);
    return { status: code, out: out.join('\n'), err: err.join('\n') };
  }
  /** The answer of a command that succeeds, from its compact output. */
  async function json<T = any>(argv: string[]): Promise<T> {
    const result = await run([...argv, '--format', 'compact']);
    if (result.code !== 0) throw new Error(result.err.join('\n'));
    return JSON.parse(result.out[0]!) as T;
  }
  return { run, printed, json };
}

export interface Call {
  path: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

export interface FakeServer {
  url: string;
  calls: Call[];
  close(): Promise<void>;
}

type Answer = {
  status?: number;
  data?: unknown;
  error?: { code: string; message: string; details?: Record<string, unknown> };
};

/** A server that answers compute's envelope from a table of `path → answer`. */
export async function fakeServer(routes: Record<string, (call: Call) => Answer>): Promise<FakeServer> {
  const calls: Call[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const call: Call = {
        path: request.url ?? '',
        headers: request.headers,
        body: JSON.parse(Buffer.concat(chunks).toString() || '{}'),
      };
      calls.push(call);
      const route = routes[call.path];
      const answer: Answer = route
        ? route(call)
        : { status: 404, error: { code: 'NOT_FOUND', message: `no route ${call.path}` } };
      const requestId = String(request.headers['x-request-id'] ?? 'req_fake');
      const body = answer.error ? { error: { ...answer.error, requestId } } : { data: answer.data };
      response.writeHead(answer.status ?? (answer.error ? 400 : 200), {
        'content-type': 'application/json',
        'x-request-id': requestId,
      });
      response.end(JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export const WHOAMI = {
  principalId: 'usr_01k5w0000000000000000000000',
  principalKind: 'person',
  tenantId: 'acme',
  actingTenantId: 'acme',
  credentialKind: 'session',
  mfa: false,
  expiresAt: null,
  platformOperator: false,
};

/**
 * Calls a method of a running server over HTTP as `token`, in the root tenant unless the body names
 * another (the public `nodes.join` takes no tenant); rejects with the answer's error fields.
 */
export async function callServer<T = any>(
  url: string,
  method: string,
  body: Record<string, unknown>,
  token: string,
): Promise<T> {
  const response = await fetch(`${url}/api/compute/${method.replaceAll('.', '/')}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(method === 'nodes.join' ? body : { tenantId: 'root', ...body }),
  });
  const answer = (await response.json()) as {
    data?: T;
    error?: { code: string; message: string; details?: any };
  };
  if (answer.error) throw Object.assign(new Error(answer.error.message), answer.error);
  return answer.data as T;
}

export interface LiveServer {
  url: string;
  close(): Promise<void>;
}

/** `serve` with the API role on a free loopback port, resolved once it listens. */
export async function serveLive(compute: ComputeInstance): Promise<LiveServer> {
  const stop = new AbortController();
  let url = '';
  const serving = serve({
    compute,
    port: 0,
    roles: ['api'],
    signal: stop.signal,
    log: () => {},
    onListening: (address) => (url = address),
  });
  for (let i = 0; i < 200 && !url; i++) await new Promise((resolve) => setTimeout(resolve, 25));
  if (!url) throw new Error('the test server did not start listening within 5 s');
  return {
    url,
    async close() {
      stop.abort();
      await serving;
    },
  };
}
