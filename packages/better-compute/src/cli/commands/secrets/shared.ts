/**
 * What the secrets commands share: a secret named by its name or its id (`sec_…`), its table
 * columns, and reading a value from a file or standard input, never from the command line.
 */
import { CliError } from '../../errors.js';

export const secretPositional = {
  name: 'secret',
  description: 'The secret’s name, or its id (sec_…)',
  required: true,
} as const;

/** `{ secretId }` for an id, `{ name }` for anything else (the server checks the name's shape). */
export function secretNamed(word: string): { secretId: string } | { name: string } {
  return /^sec_[0-9a-z]{26}$/.test(word) ? { secretId: word } : { name: word };
}

export interface SecretView {
  id: string;
  name: string;
  version: number;
  reference: string;
  updatedAt: string;
}

export function secretColumns(s: SecretView): Record<string, unknown> {
  return { id: s.id, name: s.name, version: s.version, reference: s.reference, updated: s.updatedAt };
}

/** The most bytes a value holds (MAX_SECRET_BYTES in core, repeated so help loads no zod). */
const MAX_BYTES = 32_768;

function refused(message: string, field: string, hint?: string): CliError {
  return new CliError('INVALID_ARGUMENT', message, {
    details: { field },
    hint: hint ?? 'Run "better-compute help secrets put" for its flags and examples.',
  });
}

/**
 * The value from `--value-file` or `--stdin` (exactly one), as text: kept exactly (a trailing
 * newline too), refused before anything is sent when it is empty, too long, holds a NUL byte or is
 * not UTF-8. Messages say what is wrong with the value, never what it is.
 */
export async function readSecretValue(
  cwd: string | undefined,
  flags: { valueFile?: string | undefined; stdin?: boolean | undefined },
  stdin: (() => Promise<string>) | undefined,
): Promise<string> {
  if ((flags.valueFile === undefined) === !flags.stdin)
    throw refused(
      'give the value with exactly one of --value-file FILE and --stdin; a secret is never taken from the command line',
      'valueFile',
    );
  let value: string;
  if (flags.valueFile !== undefined) {
    const { readFile } = await import('node:fs/promises');
    const { resolve } = await import('node:path');
    let bytes: Buffer;
    try {
      bytes = await readFile(resolve(cwd ?? '.', flags.valueFile));
    } catch (error) {
      throw refused(
        `--value-file ${flags.valueFile} cannot be read: ${(error as NodeJS.ErrnoException).code ?? 'error'}`,
        'valueFile',
        'Name a readable file that holds the value.',
      );
    }
    if (bytes.length > MAX_BYTES)
      throw refused(`the value is ${bytes.length} bytes; a secret holds at most ${MAX_BYTES}`, 'valueFile');
    try {
      value = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      throw refused(
        'the value is not UTF-8 text',
        'valueFile',
        'Encode binary values as text first (base64 < key.bin > key.txt).',
      );
    }
  } else {
    if (!stdin) throw refused('--stdin needs a standard input to read', 'stdin');
    value = await stdin();
  }
  if (value.length === 0) throw refused('the value is empty', flags.stdin ? 'stdin' : 'valueFile');
  if (value.includes('\0'))
    throw refused('the value holds a NUL byte, which no environment variable can', 'value');
  const size = Buffer.byteLength(value, 'utf8');
  if (size > MAX_BYTES)
    throw refused(`the value is ${size} bytes; a secret holds at most ${MAX_BYTES}`, 'value');
  return value;
}
