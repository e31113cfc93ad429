/**
 * Secrets from files (docs/deploy.md): for each variable below, `NAME_FILE=/path` gives NAME the
 * file's contents, one trailing line break dropped, so a container's mounted secret or a systemd
 * credential (`$CREDENTIALS_DIRECTORY`) reaches a command without its value ever being in argv or in
 * the process's environment. Commands see it in `io.env` only; `process.env` is left as it was, so a
 * program the CLI starts does not inherit it.
 */
import { readFileSync } from 'node:fs';
import { CliError } from './errors.js';

/** The variables that may come from a file: the ones that hold a secret. */
const FILE_VARIABLES = [
  'BETTER_COMPUTE_SECRET',
  'BETTER_COMPUTE_DATABASE_URL',
  'BETTER_COMPUTE_ADMIN_PASSWORD',
  'BETTER_COMPUTE_METRICS_TOKEN',
  'BETTER_COMPUTE_TOKEN',
  'BETTER_COMPUTE_APPROVER_PASSPHRASE',
] as const;

/** Nothing a secret needs is larger; a larger file is a wrong path (a log, a bundle). */
const MAX_BYTES = 64 * 1024;

/**
 * The environment with every `NAME_FILE` read into `NAME`; the same object when none is set. A
 * variable set both ways, a file that cannot be read, an empty one or a larger one than any secret
 * is INVALID_CONFIG, naming the variable and the path, never a byte of the file.
 */
export function environmentWithFiles(
  env: Record<string, string | undefined>,
): Record<string, string | undefined> {
  let resolved: Record<string, string | undefined> | undefined;
  for (const name of FILE_VARIABLES) {
    const path = env[`${name}_FILE`];
    if (!path) continue;
    if (env[name])
      throw new CliError('INVALID_CONFIG', `${name} and ${name}_FILE are both set`, {
        hint: `Set one of them: ${name}_FILE for a mounted file, or ${name} itself.`,
        details: { field: `${name}_FILE` },
      });
    const value = readSecretFile(name, path);
    resolved ??= { ...env };
    resolved[name] = value;
  }
  return resolved ?? env;
}

function readSecretFile(name: string, path: string): string {
  let data: Buffer;
  try {
    data = readFileSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'an error';
    throw new CliError('INVALID_CONFIG', `${name}_FILE is ${path}, which cannot be read (${code})`, {
      hint: `Mount the file there and make it readable by this user (uid ${process.getuid?.() ?? '?'}), or unset ${name}_FILE.`,
      details: { field: `${name}_FILE` },
    });
  }
  if (data.length > MAX_BYTES)
    throw new CliError('INVALID_CONFIG', `${name}_FILE is ${path}, which is over 64 KiB`, {
      hint: `Point ${name}_FILE at a file holding only the value.`,
      details: { field: `${name}_FILE` },
    });
  const value = data.toString('utf8').replace(/\r?\n$/, '');
  if (value === '' || value.includes('\0'))
    throw new CliError(
      'INVALID_CONFIG',
      `${name}_FILE is ${path}, which ${value === '' ? 'is empty' : 'holds a NUL byte'}`,
      {
        hint: `Write the value into the file (printf '%s' VALUE > FILE), or unset ${name}_FILE.`,
        details: { field: `${name}_FILE` },
      },
    );
  return value;
}
