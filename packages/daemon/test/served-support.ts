/**
 * The control plane served in the test's own process, and the real `better-compute` binary
 * calling it: what the suites that drive real daemons through the CLI share (quorum, rollouts,
 * metal bulk).
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { expect } from 'vitest';
import { betterCompute, serve } from '../../better-compute/src/index.js';
import { freePort, root } from './daemon-support.js';

const cliBin = join(root, 'packages', 'better-compute', 'bin', 'better-compute.cjs');

/**
 * `serve` with the api, controllers and gateway roles on loopback, in this process, for `config`
 * (its logs dropped): its URL, and a stop that ends it (and with it the deployment). `port` is a
 * free one unless given: a suite that restarts the server gives the same, so daemons find it again.
 */
export async function serveHere(
  config: Parameters<typeof betterCompute>[0],
  port?: number,
): Promise<{ url: string; stop: () => Promise<void> }> {
  port ??= await freePort();
  const compute = await betterCompute(config, { log: () => {} });
  const controller = new AbortController();
  let listening!: () => void;
  const ready = new Promise<void>((resolve) => (listening = resolve));
  const running = serve({
    compute,
    port,
    roles: ['api', 'controllers', 'gateway'],
    signal: controller.signal,
    log: () => {},
    onListening: () => listening(),
  });
  await Promise.race([ready, running]);
  return {
    url: `http://127.0.0.1:${port}`,
    // serve closes the deployment as it stops.
    async stop() {
      controller.abort();
      await running;
    },
  };
}

export interface CliRun {
  status: number | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  /** Without the URL and a token, as on an approver's air-gapped machine. */
  offline?: boolean;
  /** Another credential than the root administrator's, acting as `tenant`. */
  key?: string;
  tenant?: string;
}

/**
 * The real binary in `cwd` (also its HOME). Online it gets the server's URL as a flag and the
 * credential in the environment, never argv: the root administrator's unless `key` is given.
 */
export function cliIn(cwd: string, server: () => { url: string; rootKey: string }) {
  function cli(args: string[], options: CliOptions = {}): Promise<CliRun> {
    const online = options.offline
      ? []
      : ['--url', server().url, '--tenant', options.tenant ?? (options.key ? 'acme' : 'root')];
    return new Promise((resolve) => {
      const child = spawn(process.execPath, [cliBin, ...args, ...online], {
        cwd,
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          HOME: cwd,
          BETTER_IAM_HOME: join(cwd, 'iam'),
          ...(options.offline ? {} : { BETTER_COMPUTE_TOKEN: options.key ?? server().rootKey }),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.on('close', (status) => resolve({ status, stdout, stderr }));
    });
  }
  /** A command that must succeed: its JSON answer. */
  async function cliJson<T = any>(args: string[], options: CliOptions = {}): Promise<T> {
    const result = await cli([...args, '--format', 'compact'], options);
    expect(result.status, result.stderr).toBe(0);
    return JSON.parse(result.stdout) as T;
  }
  return { cli, cliJson };
}

/** The error code a failed command printed (`CODE: message`). */
export const codeOf = (result: CliRun) => /^([A-Z_]+):/m.exec(result.stderr)?.[1];

/** A call to the served API as the root administrator: the data, or the error. */
export async function rootCall(
  server: { url: string; rootKey: string },
  method: string,
  body: Record<string, unknown>,
): Promise<{ data?: any; error?: { code: string; message: string } }> {
  const response = await fetch(`${server.url}/api/compute/${method.replaceAll('.', '/')}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${server.rootKey}` },
    body: JSON.stringify({ tenantId: 'root', ...body }),
  });
  return (await response.json()) as { data?: any; error?: { code: string; message: string } };
}
