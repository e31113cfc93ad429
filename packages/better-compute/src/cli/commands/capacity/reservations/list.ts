/** `reservations list [--state] [--pool] [--mine]`: newest first, a table by default, with each one's owner. */
import { defineCommand } from '../../../define.js';
import { reservationColumns } from '../shared.js';
import { listResult, pageFlags, pageOf } from '../../shared.js';

export default defineCommand({
  name: 'reservations list',
  group: 'Capacity',
  summary: 'List your reservations, newest first (reservations.list)',
  target: 'token',
  calls: ['reservations.list'],
  flags: {
    state: {
      type: 'string',
      choices: ['queued', 'active', 'ended'],
      description: 'Only reservations in this state',
    },
    pool: { type: 'id', kind: 'pool', description: 'Only reservations of this pool' },
    mine: { type: 'boolean', description: 'Only your own (an agent’s: its person’s)' },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: [
    'better-compute reservations list --state active --format table',
    'better-compute reservations list --state queued --query items[].id',
    'better-compute reservations list --mine --state active',
  ],
  async run({ flags, api, global }) {
    const page = await (
      await api()
    ).call('reservations.list', {
      ...(flags.state ? { state: flags.state as 'queued' | 'active' | 'ended' } : {}),
      ...(flags.pool ? { poolId: flags.pool } : {}),
      ...(flags.mine ? { mine: true } : {}),
      ...pageOf(flags),
    });
    return listResult({ global }, page, reservationColumns);
  },
});
