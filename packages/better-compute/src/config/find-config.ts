/**
 * Finding the configuration file, apart from loading it: the CLI's entry asks whether one applies
 * before it decides that `help` can answer from the built-in manifest, and must not import the
 * loader (esbuild, the server) for that.
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { ComputeError } from '@better-compute/core';

export const CONFIG_FILE_NAMES = [
  'better-compute.config.mjs',
  'better-compute.config.js',
  'better-compute.config.ts',
  'better-compute.config.mts',
] as const;

export interface LoadConfigOptions {
  configPath?: string | undefined;
  cwd: string;
  env: Record<string, string | undefined>;
}

/** The configuration file that applies, or null. */
export function findConfigFile(options: LoadConfigOptions): string | null {
  const explicit = options.configPath ?? options.env.BETTER_COMPUTE_CONFIG;
  if (explicit) {
    const path = resolve(options.cwd, explicit);
    if (!existsSync(path)) {
      throw new ComputeError('CONFIG_NOT_FOUND', `no configuration file at ${path}`, {
        hint: 'Check --config or BETTER_COMPUTE_CONFIG, or run better-compute init to write one.',
      });
    }
    return path;
  }
  let dir = resolve(options.cwd);
  for (;;) {
    for (const name of CONFIG_FILE_NAMES) {
      const path = join(dir, name);
      if (existsSync(path)) return path;
    }
    const parent = dirname(dir);
    if (parent === dir) return null;
    dir = parent;
  }
}
