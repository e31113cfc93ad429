/**
 * What the token commands share: page flags, `--if-version`, `KEY=VALUE` items, the idempotency
 * key of creates, list results shaped for `--format table`, and new --out files. Light on purpose:
 * help loads the command definitions, so nothing heavy is imported here (node:fs only when run).
 */
import { ComputeError } from '@better-compute/core';
import { kebabCase, type CommandContext, type NumberFlag, type StringFlag } from '../define.js';
import { CliError, noteRetryKey } from '../errors.js';

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
 * Refuses a call that both sets and removes one key (`nodes label NODE x=1 --remove x`, `sites
 * update SITE --label a=1 --remove-label a`) before anything is sent: which of the two wins would be
 * a guess, and the server refuses it too. The message names the key and where it was given.
 */
export function assertSetOrRemove(
  commandName: string,
  change: {
    /** What the keys are of: `label`, `taint`. */
    what: string;
    /** The keys set. */
    set: Iterable<string>;
    /** The flag that sets them (`label` for --label); absent for KEY=VALUE arguments. */
    setFlag?: string;
    /** The keys removed, and the flag that removes them (`removeLabel` for --remove-label). */
    remove: readonly string[];
    removeFlag: string;
  },
): void {
  const removed = new Set(change.remove);
  for (const key of change.set) {
    if (!removed.has(key)) continue;
    const setting = `${change.setFlag ? `--${kebabCase(change.setFlag)} ` : ''}${key}=…`;
    const removing = `--${kebabCase(change.removeFlag)} ${key}`;
    throw new CliError(
      'INVALID_ARGUMENT',
      `the ${change.what} "${key}" is both set (${setting}) and removed (${removing}); nothing was sent`,
      {
        hint: `Give "${key}" once: leave out ${setting} to remove the ${change.what}, or ${removing} to set it. Run "better-compute help ${commandName}" for its flags.`,
        details: { field: change.removeFlag, key },
      },
    );
  }
}

/**
 * The `--label KEY=VALUE` and `--remove-label KEY` flags of an update (sites, pools): the labels
 * set, after refusing a key both set and removed.
 */
export function labelUpdate(
  commandName: string,
  flags: { label: readonly string[]; removeLabel: readonly string[] },
): Record<string, string> {
  const labels = keyValues(commandName, 'label', flags.label);
  assertSetOrRemove(commandName, {
    what: 'label',
    set: Object.keys(labels),
    setFlag: 'label',
    remove: flags.removeLabel,
    removeFlag: 'removeLabel',
  });
  return labels;
}

/**
 * The idempotency key of a create: --key when given (checked like the server checks it), else a new
 * one. Either way it is logged before the call, so a run that never gets an answer still shows it.
 */
function idempotencyKeyFor(
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
  context.log(`idempotency key: ${used}`);
  return used;
}

/**
 * The failures after which a create may or may not have happened, or will once it is allowed, so a
 * run with the same key can help: no answer (UNAVAILABLE: unreachable, aborted), an answer that is
 * not the API's (INVALID_RESPONSE: a proxy's 502 or 504), a limit (RATE_LIMITED), the server's own
 * fault (INTERNAL, and anything thrown that is not a ComputeError), and a call waiting for a person
 * (CONFIRMATION_REQUIRED, as the guide says). Any other refusal (INVALID_ARGUMENT, NOT_FOUND,
 * ACCESS_DENIED, QUOTA_EXCEEDED, CONFLICT…) is the server's decision, and the same key repeats it.
 */
const RETRY_HELPS: ReadonlySet<string> = new Set([
  'UNAVAILABLE',
  'INVALID_RESPONSE',
  'RATE_LIMITED',
  'INTERNAL',
  'CONFIRMATION_REQUIRED',
]);

/**
 * Runs a create with its idempotency key (idempotencyKeyFor): when it fails where a retry can
 * help, the failure is printed with "repeat with --key KEY to retry without creating twice" under
 * its hint; a refusal that the same key would only repeat is printed without it.
 */
export async function withIdempotencyKey<T>(
  context: Pick<CommandContext, 'log' | 'commandName'>,
  key: string | undefined,
  create: (idempotencyKey: string) => Promise<T>,
): Promise<T> {
  const used = idempotencyKeyFor(context, key);
  try {
    return await create(used);
  } catch (error) {
    if (!(error instanceof ComputeError) || RETRY_HELPS.has(error.code)) noteRetryKey(error, used);
    throw error;
  }
}

/**
 * Refuses a pasted token (anything with a `.`) where an id is expected, before anything is sent:
 * join tokens and site tokens alike are `ID.SECRET`, and no id holds a `.`.
 */
export function assertNoSecret(
  field: string,
  value: string,
  kind: { words: string; prefix: string; list: string } = {
    words: 'join token',
    prefix: 'jtok',
    list: 'better-compute join-tokens list',
  },
): void {
  if (value.includes('.'))
    throw new CliError(
      'INVALID_ARGUMENT',
      `${field} must be a ${kind.words} id (${kind.prefix}_…), not a token: it contains a "."; nothing was sent`,
      {
        hint: `Pass the id that "${kind.list}" shows, never the secret token.`,
        details: { field },
      },
    );
}

/**
 * Whether the command will print its result as a table: `--format table` or the list default, and
 * no --query. A --query picks from the method's result whatever the format, never from the
 * columns a table shows (`items[].poolId`, not the `pool` column).
 */
export function printsTable(context: Pick<CommandContext, 'global'>): boolean {
  const { format, query } = context.global;
  return query === undefined && (format === undefined || format === 'table');
}

/**
 * A list page as the command prints it: for a table, the readable columns of each row (the
 * framework adds the `(more rows: --cursor …)` footer); for JSON and any --query, the page as it
 * came.
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
 * Creates `--out` (or the command's own flag, `flag`) as a new file of mode 0600, before anything
 * is sent: an existing file is ALREADY_EXISTS (`refusal` says what is never written over it), a
 * missing or unwritable directory is INVALID_ARGUMENT, each with a hint naming the flag that was
 * given, so a bad path costs no call and mints no secret. Every command that writes a secret or an
 * export to a file opens it here.
 */
export async function createOutFile(
  cwd: string,
  out: string,
  refusal: string,
  flag = '--out',
): Promise<OutFile> {
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
    throw outFileError(error, { out, flag, directory: dirname(path), refusal });
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

/** The refusal of an output path, by the reason the system gave; anything else is rethrown. */
function outFileError(
  error: unknown,
  where: { out: string; flag: string; directory: string; refusal: string },
): unknown {
  const { out, flag, directory, refusal } = where;
  const field = { field: flag.replace(/^--/, '') };
  switch ((error as NodeJS.ErrnoException).code) {
    case 'EEXIST':
      return new CliError('ALREADY_EXISTS', `${out} already exists; ${refusal}`, {
        hint: `Pass ${flag} the name of a file that does not exist yet, or move the existing one away.`,
        details: field,
      });
    case 'ENOENT':
      return new CliError(
        'INVALID_ARGUMENT',
        `the directory of ${flag} ${out} does not exist: ${directory}`,
        {
          hint: `Create the directory first, or pass ${flag} a path in an existing one.`,
          details: { ...field, directory },
        },
      );
    case 'ENOTDIR':
      return new CliError(
        'INVALID_ARGUMENT',
        `the directory of ${flag} ${out} is not a directory: a part of ${directory} is a file`,
        {
          hint: `Pass ${flag} a path in an existing directory.`,
          details: { ...field, directory },
        },
      );
    case 'EACCES':
    case 'EPERM':
      return new CliError(
        'INVALID_ARGUMENT',
        `${flag} ${out} cannot be created: permission denied in ${directory}`,
        {
          hint: `Pass ${flag} a path in a directory you may write to.`,
          details: { ...field, directory },
        },
      );
    case 'EROFS':
      return new CliError('INVALID_ARGUMENT', `${flag} ${out} cannot be created: ${directory} is read-only`, {
        hint: `Pass ${flag} a path on a writable file system.`,
        details: { ...field, directory },
      });
    default:
      return error;
  }
}

/**
 * A one-time token that `create` mints (join and site tokens): printed in the answer without `out`;
 * with it, written to a new 0600 file created before the call, so an existing file or a missing
 * directory is ALREADY_EXISTS before a token is minted for nothing, and the answer is `shown(answer)`
 * with the file's path instead of the token.
 */
export async function mintToken<A extends { token: string }>(
  cwd: string,
  out: string | undefined,
  create: () => Promise<A>,
  shown: (answer: A) => Record<string, unknown>,
): Promise<A | Record<string, unknown>> {
  if (out === undefined) return create();
  const file = await createOutFile(cwd, out, 'a token is never written over a file');
  let answer: A;
  try {
    answer = await create();
  } catch (error) {
    await file.discard();
    throw error;
  }
  await file.write(`${answer.token}\n`);
  return { ...shown(answer), out: file.path };
}
