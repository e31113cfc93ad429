/**
 * Several `serve` replicas of one deployment on one PostgreSQL, as real processes that a test can
 * kill with SIGKILL and start again on the same port and roles.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { computeBin } from './support.js';

export interface Replica {
  readonly name: string;
  readonly port: number;
  roles: string;
  /** The API's URL, when the replica serves the API. */
  readonly url: string;
  /** Whether the process is running and ready. */
  alive: boolean;
  /** Everything the process printed in all its lives. */
  output: string;
}

export class ReplicaSet {
  readonly replicas: Replica[] = [];
  readonly #children = new Map<string, ChildProcess>();
  readonly #env: Record<string, string>;
  readonly #cwd: string;

  constructor(options: { cwd: string; env: Record<string, string> }) {
    this.#env = options.env;
    this.#cwd = options.cwd;
  }

  add(name: string, port: number, roles: string): Replica {
    const replica: Replica = {
      name,
      port,
      roles,
      url: `http://127.0.0.1:${port}/api/compute`,
      alive: false,
      output: '',
    };
    this.replicas.push(replica);
    return replica;
  }

  /** Starts the replica's process and waits until it serves (or runs its roles). */
  async start(replica: Replica, roles = replica.roles): Promise<void> {
    replica.roles = roles;
    const child = spawn(
      process.execPath,
      [computeBin, 'serve', '--port', String(replica.port), '--roles', roles],
      {
        cwd: this.#cwd,
        env: { PATH: process.env.PATH ?? '', ...this.#env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    this.#children.set(replica.name, child);
    let output = '';
    const append = (chunk: Buffer) => {
      output += chunk;
      replica.output += chunk;
    };
    child.stdout!.on('data', append);
    child.stderr!.on('data', append);
    child.once('exit', () => {
      replica.alive = false;
    });
    const deadline = Date.now() + 30_000;
    while (!/better-compute (serving|running roles)/.test(output)) {
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`replica ${replica.name} exited before it was ready:\n${output}`);
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`replica ${replica.name} was not ready in time:\n${output}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    replica.alive = true;
  }

  /** SIGKILL: no request, job or lease of the process is finished or handed back. */
  async kill(replica: Replica): Promise<void> {
    const child = this.#children.get(replica.name);
    replica.alive = false;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  /** SIGTERM to every running replica, then waits for them. */
  async stopAll(): Promise<void> {
    await Promise.all(
      [...this.#children.values()].map(async (child) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(timer);
      }),
    );
  }

  /** The live replicas that serve the API. */
  apis(): Replica[] {
    return this.replicas.filter((replica) => replica.alive && replica.roles.split(',').includes('api'));
  }
}
