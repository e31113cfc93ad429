/**
 * A sandbox's environment from secrets (docs/secrets.md). The control plane sends each value once,
 * inside the signed sandbox.create. A bwrap sandbox's daemon keeps it where the sandbox cannot see
 * it, in the sandbox's own directory with mode 0600: `env.json` (its pid 1's environment, again
 * after a restart) and `ssh/env` (sourced by the forced command of every session before it enters
 * the sandbox); neither is in a snapshot (the upper layer only), and both go with the sandbox. A
 * qemu sandbox's guest gets the same `ssh/env` text through its agent and keeps it in memory only
 * (`/run`), so a disk snapshot holds none. A value is never in a process's arguments
 * (world-readable in /proc) nor in the daemon's log.
 */
import { existsSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { SandboxEnvEntry } from '@better-compute/core/runtime-commands';
import { RuntimeError } from './image-cache.js';

export interface EnvVariable {
  name: string;
  value: string;
}

/** The environment every sandbox process starts from, whatever the daemon's own is. */
const BASE_ENV: Readonly<Record<string, string>> = {
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  HOME: '/root',
};

/** The variables of a create; a reference left unresolved means the control plane did not open it. */
export function resolvedEnv(entries: readonly SandboxEnvEntry[]): EnvVariable[] {
  return entries.map((entry) => {
    if (!('value' in entry))
      throw new RuntimeError(
        `${entry.name} came as a secret reference: the gateway opens secrets before it sends a sandbox's start`,
      );
    return { name: entry.name, value: entry.value };
  });
}

/** A word for sh, single-quoted: any byte but NUL stays as it is. */
export const shellWord = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

/** The variables as a script for sh to source: one `export NAME='value'` line each. */
export function envScript(env: readonly EnvVariable[]): string {
  return env.map(({ name, value }) => `export ${name}=${shellWord(value)}\n`).join('');
}

/** Writes a bwrap sandbox's environment files (none when it has no variables). */
export async function writeSandboxEnv(dir: string, env: readonly EnvVariable[]): Promise<void> {
  if (env.length === 0) return;
  await writeFile(join(dir, 'env.json'), JSON.stringify(env), { mode: 0o600 });
  await writeFile(join(dir, 'ssh', 'env'), envScript(env), { mode: 0o600 });
}

/** The variables a sandbox was created with, for its pid 1 after a restart. */
export function readSandboxEnv(dir: string): EnvVariable[] {
  const file = join(dir, 'env.json');
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as EnvVariable[]) : [];
}

/** A process's environment: the base one and the sandbox's variables. */
export function processEnv(env: readonly EnvVariable[]): Record<string, string> {
  return { ...BASE_ENV, ...Object.fromEntries(env.map(({ name, value }) => [name, value])) };
}
