/**
 * What the token commands share: page flags, `--if-version`, `KEY=VALUE` items, the idempotency
 * key of creates, list results shaped for `--format table`, and new --out files. Light on purpose:
 * help loads the command definitions, so nothing heavy is imported here (node:fs only when run).
 */
import type { CommandContext, NumberFlag, StringFlag } from '../define.js';
import { CliError } from '../errors.js';

export const pageFlags = {
  limit: {
    type: 'number',
    integer: true,
    min: 1,
    max: 500,
    description: 'Rows per page (1-500; the server’s default is 50)',
    placeholder: 'N',
  },
  cursor: { type: 'string', description: 'The cursor a previous page ended with', placeholder: 'CURSOR' },
} as const satisfies { limit: NumberFlag; cursor: StringFlag };

export const ifVersionFlag = {
  type: 'number',
  integer: true,
  min: 1,
  description: 'Apply only while it is at this version (else CONFLICT)',
  placeholder: 'N',
} as const satisfies NumberFlag;

export const keyFlag = {
  type: 'string',
  description: 'The idempotency key; repeat a run with the same --key to retry without creating twice',
  placeholder: 'KEY',
} as const satisfies StringFlag;

/** Drops the undefined fields, so an absent flag is absent from the input. */
export function defined<T extends Record<string, unknown>>(input: T): T {
  return Object.fromEntries(Object.entries(input).filter(([, value]) => value !== undefined)) as T;
}

/** `{ limit, cursor }` from the page flags. */
export function pageOf(flags: { limit?: number | undefined; cursor?: string | undefined }): {
  limit?: number;
  cursor?: string;
} {
  return defined({ limit: flags.limit, cursor: flags.cursor });
}

function usage(commandName: string, message: string, field: string): CliError {
  return new CliError('INVALID_ARGUMENT', message, {
    hint: `Run "better-compute help ${commandName}" for its flags and examples.`,
    details: { field },
  });
}

/** `zone=eu-1` items as a record; an item without `=` or with an empty key is a usage error. */
export function keyValues(
  commandName: string,
  field: string,
  items: readonly string[],
): Record<string, string> {
  const record: Record<string, string> = {};
  for (const item of items) {
    const eq = item.indexOf('=');
    if (eq <= 0) throw usage(commandName, `${field} takes KEY=VALUE items (got "${item}")`, field);
    record[item.slice(0, eq)] = item.slice(eq + 1);
  }
  return record;
}

/**
 * The idempotency key of a create: --key when given (checked like the server checks it), else a new
 * one. Either way it is logged, so a retry can reuse it.
 */
export function idempotencyKeyFor(
  context: Pick<CommandContext, 'log' | 'commandName'>,
  key: string | undefined,
): string {
  if (key !== undefined && !/^[A-Za-z0-9._:-]{8,200}$/.test(key)) {
    throw usage(
      context.commandName,
      `--key must be 8 to 200 letters, digits and . _ : - (got "${key}")`,
      'key',
    );
  }
  const used = key ?? `cli-${crypto.randomUUID()}`;
  context.log(`idempotency key: ${used} (repeat with --key ${used} to retry without creating twice)`);
  return used;
}

/** Refuses a pasted token (anything with a `.`) where an id is expected, before anything is sent. */
export function assertNoSecret(field: string, value: string): void {
  if (value.includes('.'))
    throw new CliError(
      'INVALID_ARGUMENT',
      `${field} must be a join token id (jtok_…), not a token: it contains a "."; nothing was sent`,
      {
        hint: `Pass the id that "better-compute join-tokens list" shows, never the secret token.`,
        details: { field },
      },
    );
}

/** Whether the command will print a table: `--format table`, or the list default with neither --format nor --query. */
export function printsTable(context: Pick<CommandContext, 'global'>): boolean {
  const { format, query } = context.global;
  return format === 'table' || (format === undefined && query === undefined);
}

/**
 * A list page as the command prints it: for a table, the readable columns of each row (the
 * framework adds the `(more rows: --cursor …)` footer); for JSON and --query, the page as it came.
 */
export function listResult<T>(
  context: Pick<CommandContext, 'global'>,
  page: { items: T[]; nextCursor: string | null },
  columns: (item: T) => Record<string, unknown>,
): unknown {
  if (!printsTable(context)) return page;
  return { items: page.items.map(columns), nextCursor: page.nextCursor };
}

/** The GPUs of a node or an inventory, one cell: `8x H100-SXM5-80GB`, `4x A100…, 4x L40S…`. */
export function gpuSummary(gpus: readonly { product: string }[]): string {
  if (gpus.length === 0) return '-';
  const counts = new Map<string, number>();
  for (const gpu of gpus) counts.set(gpu.product, (counts.get(gpu.product) ?? 0) + 1);
  return [...counts].map(([product, count]) => `${count}x ${product}`).join(', ');
}

/** A new --out file, opened before the call whose answer it will hold. */
export interface OutFile {
  /** The absolute path written. */
  readonly path: string;
  /** Writes the content, keeps the mode 0600 whatever the umask, and closes the file; removes it when that fails. */
  write(content: string): Promise<void>;
  /** Closes and removes the file: the call failed, so nothing is left behind. */
  discard(): Promise<void>;
}

/**
 * Creates `--out` as a new file of mode 0600, before anything is sent: an existing file is
 * ALREADY_EXISTS (`refusal` says what is never written over it), a missing or unwritable
 * directory is INVALID_ARGUMENT, each with a hint about the path, so a bad --out costs no call and
 * mints no secret. Every command that writes a secret or an export to --out opens it here.
 */
export async function createOutFile(cwd: string, out: string, refusal: string): Promise<OutFile> {
  const [{ open, unlink }, { dirname, resolve }] = await Promise.all([
    import('node:fs/promises'),
    import('node:path'),
  ]);
  const path = resolve(cwd, out);
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    // Exclusive: an existing file, directory or dangling symlink fails here, never written over.
    handle = await open(path, 'wx', 0o600);
  } catch (error) {
    throw outFileError(error, out, dirname(path), refusal);
  }
  const discard = async (): Promise<void> => {
    await handle.close().catch(() => {});
    await unlink(path).catch(() => {});
  };
  return {
    path,
    async write(content) {
      try {
        await handle.writeFile(content, 'utf8');
        await handle.chmod(0o600);
      } catch (error) {
        // A half-written secret or export is worse than none.
        await discard();
        throw error;
      }
      await handle.close();
    },
    discard,
  };
}

const OUT_FIELD = { field: 'out' } as const;

/** The refusal of an --out path, by the reason the system gave; anything else is rethrown. */
function outFileError(error: unknown, out: string, directory: string, refusal: string): unknown {
  switch ((error as NodeJS.ErrnoException).code) {
    case 'EEXIST':
      return new CliError('ALREADY_EXISTS', `${out} already exists; ${refusal}`, {
        hint: 'Pass --out the name of a file that does not exist yet, or move the existing one away.',
        details: OUT_FIELD,
      });
    case 'ENOENT':
      return new CliError('INVALID_ARGUMENT', `the directory of --out ${out} does not exist: ${directory}`, {
        hint: 'Create the directory first, or pass --out a path in an existing one.',
        details: { ...OUT_FIELD, directory },
      });
    case 'ENOTDIR':
      return new CliError(
        'INVALID_ARGUMENT',
        `the directory of --out ${out} is not a directory: a part of ${directory} is a file`,
        {
          hint: 'Pass --out a path in an existing directory.',
          details: { ...OUT_FIELD, directory },
        },
      );
    case 'EACCES':
    case 'EPERM':
      return new CliError(
        'INVALID_ARGUMENT',
        `--out ${out} cannot be created: permission denied in ${directory}`,
        {
          hint: 'Pass --out a path in a directory you may write to.',
          details: { ...OUT_FIELD, directory },
        },
      );
    case 'EROFS':
      return new CliError('INVALID_ARGUMENT', `--out ${out} cannot be created: ${directory} is read-only`, {
        hint: 'Pass --out a path on a writable file system.',
        details: { ...OUT_FIELD, directory },
      });
    default:
      return error;
  }
}
