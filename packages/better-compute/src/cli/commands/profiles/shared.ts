/**
 * What the profiles commands share: a profile named by its name or its id (`prof_…`), its table
 * columns, the document read from `--file PATH` or standard input (`--file -`), and a render
 * written into a new directory. Light on purpose: node:fs is imported when a command runs, and the
 * document is checked by the server, so no schema is loaded here.
 */
import type { ResolvedIO } from '../../define.js';
import { CliError } from '../../errors.js';

export const profilePositional = {
  name: 'profile',
  description: 'The profile’s name, or its id (prof_…)',
  required: true,
} as const;

export const fileFlag = {
  type: 'string',
  description: 'The profile document, a JSON file; - reads it from standard input',
  placeholder: 'PATH',
} as const;

/** `{ profileId }` for an id, `{ name }` for anything else (the server checks the name's shape). */
export function profileNamed(word: string): { profileId: string } | { name: string } {
  return /^prof_[0-9a-z]{26}$/.test(word) ? { profileId: word } : { name: word };
}

export interface ProfileSummary {
  id: string;
  name: string;
  version: number;
  poolId: string;
  image: string;
  updatedAt: string;
}

export function profileColumns(p: ProfileSummary): Record<string, unknown> {
  return { id: p.id, name: p.name, version: p.version, pool: p.poolId, image: p.image, updated: p.updatedAt };
}

/** The API's request body limit (BODY_LIMIT_BYTES in core, repeated so help loads nothing). */
const MAX_DOCUMENT_BYTES = 64 * 1024;

function refused(commandName: string, message: string, hint?: string): CliError {
  return new CliError('INVALID_ARGUMENT', message, {
    details: { field: 'file' },
    hint: hint ?? `Run "better-compute help ${commandName}" for its flags and examples.`,
  });
}

/**
 * The document of `--file PATH` (or `-`, standard input) as a JSON object, refused before anything is
 * sent when it is missing, over 64 KiB, not UTF-8 JSON or not an object. Its fields are the server's
 * to check, so a misspelt field is named the same way whichever front door sent it.
 */
export async function readProfileDocument(
  io: ResolvedIO,
  commandName: string,
  file: string | undefined,
): Promise<Record<string, unknown>> {
  if (file === undefined)
    throw refused(
      commandName,
      'give the profile document with --file PATH, or --file - to read standard input',
    );
  let text: string;
  if (file === '-') {
    if (!io.stdin) throw refused(commandName, '--file - needs a standard input to read');
    text = await io.stdin();
  } else {
    const [{ readFile, stat }, { resolve }] = await Promise.all([
      import('node:fs/promises'),
      import('node:path'),
    ]);
    const full = resolve(io.cwd, file);
    const info = await stat(full).catch(() => null);
    if (!info?.isFile())
      throw new CliError('NOT_FOUND', `${file} (--file) is not a file`, {
        details: { field: 'file' },
        hint: 'Name the JSON document of the profile (docs/profiles.md shows one).',
      });
    if (info.size > MAX_DOCUMENT_BYTES)
      throw refused(commandName, `${file} is ${info.size} bytes; a profile document is at most 64 KiB`);
    const bytes = await readFile(full);
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      throw refused(commandName, `${file} is not UTF-8 text`);
    }
  }
  if (Buffer.byteLength(text, 'utf8') > MAX_DOCUMENT_BYTES)
    throw refused(commandName, 'the document is over 64 KiB, the most a profile document is');
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    throw refused(
      commandName,
      `${file === '-' ? 'standard input' : file} is not JSON: ${(error as Error).message}`,
      'Write the document as one JSON object (docs/profiles.md shows one).',
    );
  }
  if (typeof document !== 'object' || document === null || Array.isArray(document))
    throw refused(commandName, `${file === '-' ? 'standard input' : file} is not a JSON object`);
  return document as Record<string, unknown>;
}

export interface RenderedProfile {
  profileId: string | null;
  version: number | null;
  documentSha256: string;
  manifestSha256: string;
  files: { path: string; mode: string; bytes: number; sha256: string; content: string }[];
}

/** A path the server named, checked anyway: relative, plain segments, no way out of the directory. */
const SAFE_PATH = /^(?!.*(^|\/)\.\.?(\/|$))[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/;

/**
 * Writes a render into `out`, a directory that must not exist yet (ALREADY_EXISTS otherwise, so a
 * render never mixes with older files); each file with its mode, the directory 0700. Answers the
 * absolute path. A file that fails leaves the directory removed.
 */
export async function writeRender(io: ResolvedIO, out: string, rendered: RenderedProfile): Promise<string> {
  const [{ mkdir, writeFile, chmod, rm }, { resolve, dirname, join }, { createHash }] = await Promise.all([
    import('node:fs/promises'),
    import('node:path'),
    import('node:crypto'),
  ]);
  const root = resolve(io.cwd, out);
  for (const file of rendered.files) {
    const digest = createHash('sha256').update(file.content, 'utf8').digest('hex');
    if (!SAFE_PATH.test(file.path) || !/^0[0-7]{3}$/.test(file.mode) || digest !== file.sha256)
      throw new CliError(
        'INVALID_RESPONSE',
        `the server answered a rendered file that cannot be written: ${file.path}`,
        {
          hint: 'Check that --url names a better-compute deployment.',
        },
      );
  }
  try {
    await mkdir(root, { mode: 0o700 });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST')
      throw new CliError(
        'ALREADY_EXISTS',
        `${out} already exists; a render is written only into a new directory`,
        {
          details: { field: 'out' },
          hint: 'Pass --out the name of a directory that does not exist yet, or move the existing one away.',
        },
      );
    if (code === 'ENOENT')
      throw new CliError(
        'INVALID_ARGUMENT',
        `the directory --out ${out} is in does not exist: ${dirname(root)}`,
        {
          details: { field: 'out' },
          hint: 'Create its parent first, or pass --out a path in an existing directory.',
        },
      );
    throw error;
  }
  try {
    for (const file of rendered.files) {
      const path = join(root, file.path);
      await mkdir(dirname(path), { recursive: true, mode: 0o700 });
      await writeFile(path, file.content, { flag: 'wx', mode: Number.parseInt(file.mode, 8) });
      await chmod(path, Number.parseInt(file.mode, 8));
    }
  } catch (error) {
    await rm(root, { recursive: true, force: true });
    throw error;
  }
  return root;
}
