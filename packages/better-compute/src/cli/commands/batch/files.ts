/**
 * The files the approver tools read: the approver key (refused when others can read it, as ssh
 * refuses a private key) and the JSON documents (scope, expectations, approver sets), each bounded
 * so a wrong path costs a message, not the machine's memory.
 */
import type { KeyObject } from 'node:crypto';
import { CliError } from '../../errors.js';
import type { ResolvedIO } from '../../define.js';

/** A PEM P-256 key is under 1 KiB, encrypted or not. */
const MAX_KEY_BYTES = 16 * 1024;

/** The environment variable that holds an approver key's passphrase; never a flag, so never in argv. */
export const PASSPHRASE_ENV = 'BETTER_COMPUTE_APPROVER_PASSPHRASE';

export function passphraseOf(io: ResolvedIO): string | undefined {
  const value = io.env[PASSPHRASE_ENV];
  return value === undefined || value === '' ? undefined : value;
}

/** Reads `--key PATH`: a regular file of at most 16 KiB, readable by its owner only. */
export async function readKeyFile(
  io: ResolvedIO,
  path: string,
): Promise<{ privateKey: KeyObject; kid: string }> {
  const [{ readFile, stat }, { resolve }, { readApproverKey }] = await Promise.all([
    import('node:fs/promises'),
    import('node:path'),
    import('@better-compute/core/quorum'),
  ]);
  const full = resolve(io.cwd, path);
  const info = await stat(full).catch(() => null);
  if (!info?.isFile() || info.size > MAX_KEY_BYTES)
    throw new CliError('NOT_FOUND', `${path} is not an approver key file`, {
      hint: 'Make one with "better-compute batch keygen --out PATH".',
      details: { field: 'key' },
    });
  if ((info.mode & 0o077) !== 0)
    throw new CliError(
      'INVALID_STATE',
      `${path} can be read by other users (mode ${(info.mode & 0o777).toString(8)})`,
      {
        hint: `Run chmod 600 ${path}: an approver key is a secret, as an ssh key is.`,
        details: { field: 'key' },
      },
    );
  return readApproverKey(await readFile(full, 'utf8'), path, passphraseOf(io));
}

/** Reads a text file named by `flag`, at most `maxBytes`. */
export async function readTextFile(
  io: ResolvedIO,
  path: string,
  flag: string,
  maxBytes: number,
): Promise<string> {
  const [{ readFile, stat }, { resolve }] = await Promise.all([
    import('node:fs/promises'),
    import('node:path'),
  ]);
  const full = resolve(io.cwd, path);
  const info = await stat(full).catch(() => null);
  if (!info?.isFile())
    throw new CliError('NOT_FOUND', `${path} (${flag}) is not a file`, {
      details: { field: flag.replace(/^--/, '') },
    });
  if (info.size > maxBytes)
    throw new CliError(
      'INVALID_ARGUMENT',
      `${path} (${flag}) is over ${Math.round(maxBytes / 1024 / 1024)} MiB`,
      {
        details: { field: flag.replace(/^--/, '') },
      },
    );
  return readFile(full, 'utf8');
}

/** Reads and parses a JSON file named by `flag`. */
export async function readJsonFile(
  io: ResolvedIO,
  path: string,
  flag: string,
  maxBytes: number,
  hint: string,
): Promise<unknown> {
  const text = await readTextFile(io, path, flag, maxBytes);
  try {
    return JSON.parse(text);
  } catch {
    throw new CliError('INVALID_ARGUMENT', `${path} (${flag}) is not JSON`, {
      hint,
      details: { field: flag.replace(/^--/, '') },
    });
  }
}

/** Writes `document` as JSON to a new `--out` file (never over one), answering its path. */
export async function writeJsonOut(
  io: ResolvedIO,
  out: string,
  document: unknown,
  refusal: string,
): Promise<string> {
  const { createOutFile } = await import('../shared.js');
  const file = await createOutFile(io.cwd, out, refusal);
  await file.write(`${JSON.stringify(document, null, 2)}\n`);
  return file.path;
}
