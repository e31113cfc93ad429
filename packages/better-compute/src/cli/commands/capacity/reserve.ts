/**
 * `reserve --pool --gpus --for`: reserves GPUs with a new idempotency key on every run unless
 * --key, printed on stderr so stdout stays the result. The selector is checked locally first.
 * While the reservation is queued it waits up to --wait seconds (wait.ts: progress on stderr), then
 * prints the reservation as it is; one that ended while queued, without starting, fails the command.
 */
import { defineCommand } from '../../define.js';
import { waitFor } from '../../wait.js';
import { checkSelector, matchFlags } from './shared.js';
import { withIdempotencyKey } from '../shared.js';

export default defineCommand({
  name: 'reserve',
  group: 'Capacity',
  summary: 'Reserve GPUs from a pool, waiting while queued (reservations.create)',
  target: 'token',
  calls: ['reservations.create', 'reservations.get'],
  flags: {
    pool: { type: 'id', kind: 'pool', required: true, description: 'The pool' },
    gpus: { type: 'number', integer: true, min: 1, max: 4096, required: true, description: 'How many GPUs' },
    for: {
      type: 'duration',
      required: true,
      min: '1m',
      max: '30d',
      description: 'How long, such as 8h or 1d (1m to 30d)',
      placeholder: 'DURATION',
    },
    ...matchFlags,
    project: { type: 'id', kind: 'project', description: 'The project it is for' },
    key: {
      type: 'string',
      description: 'The idempotency key, to retry without reserving twice',
      placeholder: 'KEY',
    },
    wait: {
      type: 'number',
      integer: true,
      min: 0,
      max: 3600,
      default: 20,
      description:
        'Seconds to wait while queued, with progress on stderr; one that ends without starting exits 1 (0: do not wait)',
      placeholder: 'SECONDS',
    },
  },
  examples: [
    'better-compute reserve --pool pool_01k… --gpus 4 --for 8h --nvlink',
    'better-compute reserve --pool pool_01k… --gpus 8 --for 1d --selector "gpuProduct in (H100-SXM5-80GB), vramGiB >= 80"',
    'better-compute reserve --pool pool_01k… --gpus 2 --for 2h --key cli-3f1c… --wait 0',
  ],
  async run({ flags, api, log, print, status, commandName }) {
    await checkSelector(flags.selector);
    const client = await api();
    // Only the create's failure is worth a retry with the key: once it answered, the reservation exists.
    const reservation = await withIdempotencyKey({ log, commandName }, flags.key, (idempotencyKey) =>
      client.call('reservations.create', {
        poolId: flags.pool,
        gpus: flags.gpus,
        durationSeconds: flags.for,
        nvlink: flags.nvlink,
        ...(flags.selector !== undefined ? { selector: flags.selector } : {}),
        ...(flags.model !== undefined ? { gpuModel: flags.model } : {}),
        ...(flags.product !== undefined ? { gpuProduct: flags.product } : {}),
        ...(flags.tolerate.length ? { tolerations: flags.tolerate } : {}),
        ...(flags.project !== undefined ? { projectId: flags.project } : {}),
        idempotencyKey,
      }),
    );
    return waitFor({ log, print, status }, reservation, flags.wait, {
      noun: 'reservation',
      show: `better-compute reservations get ${reservation.id}`,
      read: () => client.call('reservations.get', { reservationId: reservation.id }),
      busy: (current) => current.state === 'queued',
      describe: (current) =>
        current.state === 'queued'
          ? `queued, position ${current.queuePosition ?? '?'}`
          : current.state === 'ended'
            ? `ended (${current.endReason ?? 'no reason'})`
            : current.state,
      // A reservation that ended without ever starting gave no GPUs; one that ran and ended (a
      // --key retry after its release) is the answer it always was.
      failure: (current) =>
        current.state === 'ended' && current.activatedAt === null
          ? `ended (${current.endReason ?? 'no reason given'}) while queued, without starting`
          : null,
      hint: `"better-compute reservations get ${reservation.id}" shows it; reserve again, or ask for fewer GPUs ("better-compute capacity --pool ${flags.pool}" shows what is free).`,
    });
  },
});
