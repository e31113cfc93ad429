/** `reservations get RSV`: the reservation with its binding (`--query binding`: nodes and GPU indices). */
import { defineCommand } from '../../../define.js';

export default defineCommand({
  name: 'reservations get',
  group: 'Capacity',
  summary: 'Show a reservation with its binding (reservations.get)',
  target: 'token',
  calls: ['reservations.get'],
  positionals: [
    { name: 'reservation', description: 'The reservation, rsv_…', required: true, kind: 'reservation' },
  ],
  examples: [
    'better-compute reservations get rsv_01k…',
    'better-compute reservations get rsv_01k… --query binding',
  ],
  async run({ args, api }) {
    return (await api()).call('reservations.get', { reservationId: args.reservation });
  },
});
