/**
 * The files the offline tools read and write: private keys (refused when other users can read them,
 * as ssh refuses a private key), JSON documents bounded in size so a wrong path costs a message and
 * not the machine's memory, and new `--out` files that are never written over. Light on purpose:
 * node:fs is imported when a command runs.
 */
import { CliError } from '../errors.js';
import type { ResolvedIO } from '../define.js';

/** A PEM key is well under 1 KiB, encrypted or not. */
const MAX_KEY_BYTES = 16 * 1024;

/**
 * Reads a private key file named by `--key`: a regular file of at most 16 KiB, readable by its
 * owner only (INVALID_STATE otherwise, before it is read). `what` names the key in messages
 * (`an approver key`); `makeOne` is the hint when there is no such file (the command that makes one).
 */
export async function readPrivateKeyFile(
  io: ResolvedIO,
  path: string,
  what: string,
  makeOne: string,
): Promise<string> {
  const [{ readFile, stat }, { resolve }] = await Promise.all([
    import('node:fs/promises'),
    import('node:path'),
  ]);
  const full = resolve(io.cwd, path);
  const info = await stat(full).catch(() => null);
  if (!info?.isFile() || info.size > MAX_KEY_BYTES)
    throw new CliError('NOT_FOUND', `${path} is not ${what} file`, {
      hint: makeOne,
      details: { field: 'key' },
    });
  if ((info.mode & 0o077) !== 0)
    throw new CliError(
      'INVALID_STATE',
      `${path} can be read by other users (mode ${(info.mode & 0o777).toString(8)})`,
      {
        hint: `Run chmod 600 ${path}: ${what} is a secret, as an ssh key is.`,
        details: { field: 'key' },
      },
    );
  return readFile(full, 'utf8');
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
    throw new CliError('INVALID_ARGUMENT', `${path} (${flag}) is over ${sizeOf(maxBytes)}`, {
      details: { field: flag.replace(/^--/, '') },
    });
  return readFile(full, 'utf8');
}

const sizeOf = (bytes: number) =>
  bytes >= 1024 * 1024 ? `${Math.round(bytes / 1024 / 1024)} MiB` : `${Math.round(bytes / 1024)} KiB`;

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
  const { createOutFile } = await import('./shared.js');
  const file = await createOutFile(io.cwd, out, refusal);
  await file.write(`${JSON.stringify(document, null, 2)}\n`);
  return file.path;
}

/** A new key's two files, PATH and PATH.pub, both claimed before the key is made. */
export interface KeyFilePair {
  /** Absolute paths of the private and the public file. */
  readonly paths: { out: string; publicKey: string };
  /** Makes the key and writes both files (mode 0600); removes both when either step fails. */
  fill<K extends { privatePem: string; publicPem: string }>(make: () => K): Promise<K>;
}

/**
 * Claims `out` and `out.pub` as new files (never over an existing one: ALREADY_EXISTS, and a taken
 * `.pub` leaves no half key behind), then hands back what makes and writes the key.
 */
export async function claimKeyFiles(io: ResolvedIO, out: string, refusal: string): Promise<KeyFilePair> {
  const { createOutFile } = await import('./shared.js');
  const privateFile = await createOutFile(io.cwd, out, refusal);
  let publicFile: Awaited<ReturnType<typeof createOutFile>>;
  try {
    publicFile = await createOutFile(io.cwd, `${out}.pub`, refusal);
  } catch (error) {
    await privateFile.discard();
    throw error;
  }
  return {
    paths: { out: privateFile.path, publicKey: publicFile.path },
    async fill(make) {
      try {
        const key = make();
        await privateFile.write(key.privatePem);
        await publicFile.write(key.publicPem);
        return key;
      } catch (error) {
        await Promise.all([privateFile.discard(), publicFile.discard()]);
        throw error;
      }
    },
  };
}
