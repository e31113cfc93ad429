/**
 * `reserve --pool --gpus --for`: reserves GPUs with a new idempotency key on every run unless
 * --key, printed on stderr so stdout stays the result. The selector is checked locally first.
 * While the reservation is queued it polls reservations.get for up to --wait seconds, then prints
 * the reservation as it is.
 */
import { defineCommand } from '../../define.js';
import { checkSelector, matchFlags } from './shared.js';
import { withIdempotencyKey } from '../shared.js';

const POLL_MS = 500;

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
      description: 'Seconds to wait while queued (0: do not wait)',
      placeholder: 'SECONDS',
    },
  },
  examples: [
    'better-compute reserve --pool pool_01k… --gpus 4 --for 8h --nvlink',
    'better-compute reserve --pool pool_01k… --gpus 8 --for 1d --selector "gpuProduct in (H100-SXM5-80GB), vramGiB >= 80"',
    'better-compute reserve --pool pool_01k… --gpus 2 --for 2h --key cli-3f1c… --wait 0',
  ],
  async run({ flags, api, log, commandName }) {
    await checkSelector(flags.selector);
    const client = await api();
    // Only the create's failure is worth a retry with the key: once it answered, the reservation exists.
    let reservation = await withIdempotencyKey({ log, commandName }, flags.key, (idempotencyKey) =>
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
    if (reservation.state === 'queued' && flags.wait > 0) {
      log(
        `${reservation.id} is queued (position ${reservation.queuePosition ?? '?'}); waiting up to ${flags.wait}s`,
      );
      const deadline = Date.now() + flags.wait * 1000;
      while (reservation.state === 'queued' && Date.now() < deadline) {
        await new Promise((resolve) =>
          setTimeout(resolve, Math.min(POLL_MS, Math.max(0, deadline - Date.now()))),
        );
        reservation = await client.call('reservations.get', { reservationId: reservation.id });
      }
      if (reservation.state === 'queued')
        log(
          `${reservation.id} is still queued; see it with: better-compute reservations get ${reservation.id}`,
        );
    }
    return reservation;
  },
});
