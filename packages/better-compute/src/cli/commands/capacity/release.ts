/**
 * `release RSV`: frees the GPUs now, or cancels the reservation while queued. The words keygen,
 * sign, cosign and verify after `release` are the release-manifest tools (release/index.ts).
 */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'release',
  group: 'Capacity',
  summary: 'Release a reservation’s GPUs now, or cancel it while queued (reservations.release)',
  description:
    'After release, the words keygen, sign, cosign and verify are the offline tools for signed bcd release manifests (listed below); any other word is a reservation.',
  target: 'token',
  calls: ['reservations.release'],
  positionals: [
    { name: 'reservation', description: 'The reservation, rsv_…', required: true, kind: 'reservation' },
  ],
  flags: {
    ifVersion: {
      type: 'number',
      integer: true,
      min: 1,
      description: 'Apply only at this version (else CONFLICT)',
    },
  },
  examples: ['better-compute release rsv_01k…'],
  async run({ args, flags, api }) {
    return (await api()).call('reservations.release', {
      reservationId: args.reservation,
      ...(flags.ifVersion !== undefined ? { ifVersion: flags.ifVersion } : {}),
    });
  },
});
