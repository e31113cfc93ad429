/**
 * Finding and loading a configuration: `--config`, else BETTER_COMPUTE_CONFIG, else the nearest
 * better-compute.config.{mjs,js,ts,mts} from the working directory up, else a configuration made
 * from BETTER_COMPUTE_DATABASE_URL (with BETTER_COMPUTE_SECRET and BETTER_COMPUTE_PKI); CONFIG_NOT_FOUND
 * otherwise. The file's own `secret` and `pki` win over the environment's. A `.ts` file is compiled with
 * esbuild on the fly, so it loads without a build step.
 */
import { rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { randomBytes } from 'node:crypto';
import { ComputeError } from '@better-compute/core';
import type { ComputeInstance } from '../types.js';
import type { ComputeConfig } from './define-config.js';
import { findConfigFile, type LoadConfigOptions } from './find-config.js';

export { CONFIG_FILE_NAMES, findConfigFile, type LoadConfigOptions } from './find-config.js';

export interface LoadedConfig {
  config: ComputeConfig;
  /** The file it came from; null when it was made from BETTER_COMPUTE_DATABASE_URL. */
  path: string | null;
  /** The file's `export const commands`, project commands for the CLI. */
  commands: unknown[];
}

/** INVALID_CONFIG for a file that does not load, saying where when the compiler or runtime knows. */
function doesNotLoad(path: string, error: unknown): ComputeError {
  // esbuild's failure lists its errors with their place; the first one says what to fix.
  const first = (
    error as { errors?: { text?: string; location?: { line: number; column: number } | null }[] }
  ).errors?.[0];
  const reason = first?.text
    ? `${first.location ? `line ${first.location.line}, column ${first.location.column + 1}: ` : ''}${first.text}`
    : error instanceof Error
      ? error.message.split('\n')[0]
      : String(error);
  return new ComputeError('INVALID_CONFIG', `${path} does not load: ${reason}`, {
    hint: 'Fix the configuration file (BETTER_COMPUTE_DEBUG=1 shows where it failed), then run the command again.',
    cause: error,
  });
}

async function importConfigModule(path: string): Promise<Record<string, unknown>> {
  if (!/\.m?ts$/.test(path)) {
    try {
      return (await import(pathToFileURL(path).href)) as Record<string, unknown>;
    } catch (error) {
      throw doesNotLoad(path, error);
    }
  }
  const { build } = await import('esbuild');
  // The compiled file sits beside the source so its imports resolve from the same node_modules.
  const out = join(dirname(path), `.better-compute.config.${randomBytes(4).toString('hex')}.mjs`);
  try {
    const result = await build({
      entryPoints: [path],
      bundle: true,
      packages: 'external',
      platform: 'node',
      format: 'esm',
      target: 'node20',
      write: false,
      logLevel: 'silent',
    });
    await writeFile(out, result.outputFiles[0]!.contents);
    return (await import(pathToFileURL(out).href)) as Record<string, unknown>;
  } catch (error) {
    if (error instanceof ComputeError) throw error;
    throw doesNotLoad(path, error);
  } finally {
    await rm(out, { force: true });
  }
}

export async function loadConfig(options: LoadConfigOptions): Promise<LoadedConfig> {
  const path = findConfigFile(options);
  const databaseUrl = options.env.BETTER_COMPUTE_DATABASE_URL;
  // The deployment's secret comes from the environment unless the file gives one.
  const secret = options.env.BETTER_COMPUTE_SECRET ? { secret: options.env.BETTER_COMPUTE_SECRET } : {};
  // So does the PKI bundle's path (a mounted file in a container or a systemd credential).
  const pki = options.env.BETTER_COMPUTE_PKI ? { pki: options.env.BETTER_COMPUTE_PKI } : {};
  if (!path) {
    if (databaseUrl)
      return { config: { database: databaseUrl, ...secret, ...pki }, path: null, commands: [] };
    throw new ComputeError('CONFIG_NOT_FOUND', 'no configuration found', {
      hint: 'Run "better-compute init", pass --config, or set BETTER_COMPUTE_DATABASE_URL.',
    });
  }
  const loaded = await importConfigModule(path);
  const config = (loaded.default ?? loaded.config) as ComputeConfig | undefined;
  if (config === undefined) {
    throw new ComputeError('INVALID_CONFIG', `${path} has no default export`, {
      hint: 'Export the configuration: export default defineConfig({ … }).',
    });
  }
  if (!config || typeof config !== 'object' || Array.isArray(config)) {
    throw new ComputeError(
      'INVALID_CONFIG',
      `${path} exports ${config === null ? 'null' : Array.isArray(config) ? 'an array' : `a ${typeof config}`}, not a configuration`,
      { hint: 'Export the configuration object: export default defineConfig({ database: … }).' },
    );
  }
  const { database } = config as { database?: unknown };
  if (
    database !== undefined &&
    typeof database !== 'string' &&
    (typeof database !== 'object' || database === null)
  ) {
    throw new ComputeError(
      'INVALID_CONFIG',
      `${path}: database must be a URL (postgres://… or pglite:…) or an opened database, not ${database === null ? 'null' : `a ${typeof database}`}`,
      { hint: 'Set database to a URL such as process.env.BETTER_COMPUTE_DATABASE_URL.' },
    );
  }
  const commands = Array.isArray(loaded.commands) ? loaded.commands : [];
  // The environment's database URL fills in when the file names none.
  const withDatabase =
    config.database === undefined && databaseUrl ? { ...config, database: databaseUrl } : config;
  return { config: { ...secret, ...pki, ...withDatabase }, path, commands };
}

/** Loads the configuration and builds the deployment (without migrating). */
export async function loadCompute(options: LoadConfigOptions): Promise<ComputeInstance> {
  const { config } = await loadConfig(options);
  const { betterCompute } = await import('../compute.js');
  return betterCompute(config);
}
