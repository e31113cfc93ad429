/**
 * `events list [--type T] [--limit N] [--cursor 184467:12]`: the tenant's events in commit order,
 * a table by default. --cursor takes only the list's colon form; the stream's dotted form (what
 * `events watch --since` prints) is a usage error before anything is sent. --type is checked
 * before sending too, by events.list's own schema, so the CLI and `api events.list` agree.
 */
import { defineCommand } from '../../define.js';
import { CliError } from '../../errors.js';
import { listResult } from '../shared.js';

export default defineCommand({
  name: 'events list',
  group: 'Events',
  summary: 'Page through your tenant’s events in commit order (events.list)',
  target: 'token',
  calls: ['events.list'],
  flags: {
    type: {
      type: 'string',
      description: 'A type (reservation.created), or a prefix ending with . or .* (reservation., node.*)',
      placeholder: 'TYPE',
    },
    limit: { type: 'number', integer: true, min: 1, max: 500, description: 'Rows per page (default 50)' },
    cursor: {
      type: 'string',
      description: 'Start after this outbox position, in the colon form 184467:12',
      placeholder: 'TX:INDEX',
    },
  },
  defaultFormat: 'table',
  examples: [
    'better-compute events list --type reservation.',
    'better-compute events list --limit 100 --cursor 184467:12',
  ],
  async run({ flags, api, global }) {
    if (flags.type !== undefined) await checkType(flags.type);
    if (flags.cursor !== undefined) {
      const { parsePosition } = await import('@better-compute/core');
      try {
        parsePosition(flags.cursor, 'list', '--cursor');
      } catch (error) {
        const dotted = /^\d+\.\d+$/.test(flags.cursor.trim());
        throw new CliError('INVALID_ARGUMENT', error instanceof Error ? error.message : String(error), {
          hint: dotted
            ? `events list takes the colon form: --cursor ${flags.cursor.trim().replace('.', ':')}`
            : 'Pass the position a previous page ended with, such as 184467:12.',
          details: { field: 'cursor' },
        });
      }
    }
    const page = await (
      await api()
    ).call('events.list', {
      ...(flags.type !== undefined ? { type: flags.type } : {}),
      ...(flags.limit !== undefined ? { limit: flags.limit } : {}),
      ...(flags.cursor !== undefined ? { cursor: flags.cursor.trim() } : {}),
    });
    return listResult({ global }, page, (e) => ({
      position: e.position,
      type: e.type,
      subject: e.subject.id ?? e.subject.type,
      actor: e.actor ?? '',
      occurredAt: e.occurredAt,
    }));
  },
});

/** Refuses a --type that events.list would refuse, with the flag's name and a hint. */
async function checkType(type: string): Promise<void> {
  const { methods } = await import('@better-compute/core/methods');
  const checked = methods['events.list'].input.shape.type.safeParse(type);
  if (checked.success) return;
  // `node*`, `node.` with extra dots or stars: the words before them, as a prefix.
  const words = type.trim().replace(/[.*]+$/, '');
  const prefix = `${words}.*`;
  const hint =
    words !== '' && methods['events.list'].input.shape.type.safeParse(prefix).success
      ? `For every ${words} event pass --type ${prefix}; for one type, the whole type (reservation.created).`
      : 'Pass one type (reservation.created) or a prefix ending with . or .* (reservation., node.*); leave --type out for every event.';
  throw new CliError('INVALID_ARGUMENT', `--type ${checked.error.issues[0]?.message} (got "${type}")`, {
    hint,
    details: { field: 'type' },
  });
}
