/**
 * `events watch --url URL [--path /watch] [--tenant T] [--types P,…] [--since POS] [--count N]`:
 * follows a running server's event stream through the client's $watch and prints one compact,
 * terminal-safe JSON line per event: the stream's cursor (`184467.12`, what --since takes) and the
 * record events.list returns. It reconnects from the last event after a broken connection and stops
 * on Ctrl-C, after --count events, or on a refusal (exiting with the refusal's code). --types and
 * --since are checked before it connects.
 */
import { defineCommand } from '../../define.js';
import { CliError } from '../../errors.js';

const MAX_TYPES = 20;

export default defineCommand({
  name: 'events watch',
  group: 'Events',
  summary: 'Follow your tenant’s events live from a running server, one JSON line per event',
  target: 'token',
  output: false,
  calls: ['events.list'],
  flags: {
    path: {
      type: 'string',
      description:
        'The stream’s path on the server (default /watch; the console app serves /api/compute/watch)',
      placeholder: 'PATH',
    },
    types: {
      type: 'string',
      description: `Up to ${MAX_TYPES} type patterns, comma-separated: reservation.created, reservation.*, node.`,
      placeholder: 'PATTERNS',
    },
    since: {
      type: 'string',
      description:
        'Start after this outbox position: a cursor a previous run printed (184467.12) or 184467:12',
      placeholder: 'POSITION',
    },
    count: {
      type: 'number',
      integer: true,
      min: 1,
      max: 1_000_000,
      description: 'Stop after this many events',
    },
  },
  examples: [
    "better-compute events watch --url https://compute.example.com --tenant acme --types 'node.*,reservation.*'",
    'better-compute events watch --url https://compute.example.com --count 100',
    'better-compute events watch --url https://compute.example.com --since 184467.12 --count 100',
    'better-compute events watch --url https://compute.example.com --path /api/compute/watch',
  ],
  async run({ flags, api, global, io, log }) {
    if (!global.url) {
      throw new CliError('UNSUPPORTED', 'events watch follows a running server’s stream, and needs --url', {
        hint: 'Pass --url https://compute.example.com (or set BETTER_COMPUTE_URL); better-compute dev and serve print theirs.',
      });
    }
    const types = flags.types === undefined ? undefined : await checkTypes(flags.types);
    let since: string | undefined;
    if (flags.since !== undefined) {
      const { parsePosition, formatStreamCursor } = await import('@better-compute/core');
      try {
        since = formatStreamCursor(parsePosition(flags.since, 'either', '--since'));
      } catch (error) {
        throw new CliError('INVALID_ARGUMENT', error instanceof Error ? error.message : String(error), {
          hint: 'Pass the cursor of the last line a previous run printed (184467.12), or an events list position (184467:12).',
          details: { field: 'since' },
        });
      }
    }
    const path = flags.path ?? '/watch';
    if (!/^\/[A-Za-z0-9._~/-]*$/.test(path)) {
      throw new CliError(
        'INVALID_ARGUMENT',
        `--path must be an absolute path such as /watch (got "${path}")`,
        {
          hint: 'Pass the path the server serves its stream at: /watch, or /api/compute/watch for the console app.',
          details: { field: 'path' },
        },
      );
    }
    const { safeJson } = await import('@better-compute/core');
    const client = await api();
    const stop = new AbortController();
    const signal = io.signal;
    const onSignal = () => stop.abort();
    signal?.addEventListener('abort', onSignal, { once: true });
    if (signal?.aborted) stop.abort();
    let printed = 0;
    try {
      const handle = await client.watch({
        path,
        ...(types ? { types } : {}),
        ...(since ? { since } : {}),
        signal: stop.signal,
        onEvent(event) {
          if (stop.signal.aborted) return;
          io.out(safeJson(JSON.stringify(event)));
          printed++;
          if (flags.count !== undefined && printed >= flags.count) stop.abort();
        },
        onStatus(status) {
          if (status.state !== 'retrying') return;
          const why = status.error
            ? `stream interrupted (${status.error.code}: ${status.error.message})`
            : 'the server ended the stream';
          log(`${why}; reconnecting in ${(status.delayMs! / 1000).toFixed(1)} s`);
        },
      });
      await handle.done;
    } finally {
      signal?.removeEventListener('abort', onSignal);
    }
  },
});

/** Refuses what the stream would refuse: more than 20 patterns, or one events.list's type would not take. */
async function checkTypes(text: string): Promise<string[]> {
  const types = text.split(',').map((type) => type.trim());
  if (types.length > MAX_TYPES)
    throw new CliError(
      'INVALID_ARGUMENT',
      `--types takes at most ${MAX_TYPES} patterns (got ${types.length})`,
      {
        hint: 'Use prefixes (reservation.*) to cover several types with one pattern.',
        details: { field: 'types' },
      },
    );
  const { methods } = await import('@better-compute/core/methods');
  const schema = methods['events.list'].input.shape.type;
  for (const type of types) {
    const checked = schema.safeParse(type);
    if (!checked.success || type === '')
      throw new CliError(
        'INVALID_ARGUMENT',
        `--types: "${type}" ${checked.success ? 'is empty' : checked.error.issues[0]?.message}`,
        {
          hint: "Pass types like reservation.created or prefixes like 'reservation.*', comma-separated.",
          details: { field: 'types' },
        },
      );
  }
  return types;
}
