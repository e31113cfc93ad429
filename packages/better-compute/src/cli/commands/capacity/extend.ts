/** `extend RSV --by DURATION`. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'extend',
  group: 'Capacity',
  summary: 'Extend a queued or active reservation (reservations.extend)',
  target: 'token',
  calls: ['reservations.extend'],
  positionals: [
    { name: 'reservation', description: 'The reservation, rsv_…', required: true, kind: 'reservation' },
  ],
  flags: {
    by: {
      type: 'duration',
      required: true,
      min: '1m',
      max: '30d',
      description: 'How much longer, such as 4h (1m to 30d; a reservation lasts 30d at most)',
      placeholder: 'DURATION',
    },
    ifVersion: {
      type: 'number',
      integer: true,
      min: 1,
      description: 'Apply only at this version (else CONFLICT)',
    },
  },
  examples: ['better-compute extend rsv_01k… --by 4h'],
  async run({ args, flags, api }) {
    return (await api()).call('reservations.extend', {
      reservationId: args.reservation,
      bySeconds: flags.by,
      ...(flags.ifVersion !== undefined ? { ifVersion: flags.ifVersion } : {}),
    });
  },
});
