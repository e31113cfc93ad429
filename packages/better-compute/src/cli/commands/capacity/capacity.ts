/**
 * `capacity`: total, reserved, free and unavailable GPUs per pool and per GPU model, as a table;
 * `capacity --preview --pool --gpus --for`: whether a reservation would fit now and where, and if
 * not, the earliest time it could start.
 */
import { defineCommand } from '../../define.js';
import { CliError } from '../../errors.js';
import { checkSelector, matchFlags } from './shared.js';

interface Counts {
  total: number;
  reserved: number;
  free: number;
  unavailable: number;
}
interface PoolCapacity extends Counts {
  poolId: string;
  name: string;
  class: string;
  queuedReservations: number;
  queuedGpus: number;
  models: ({ gpuModel: string } & Counts)[];
}

/** One row per pool (model `*`), then one per GPU model in it. */
function capacityRows(result: unknown): unknown[] | undefined {
  if (typeof result !== 'object' || result === null || !Array.isArray((result as { items?: unknown }).items))
    return undefined;
  const rows: unknown[] = [];
  for (const pool of (result as { items: PoolCapacity[] }).items) {
    const counts = (c: Counts) => ({
      total: c.total,
      reserved: c.reserved,
      free: c.free,
      unavailable: c.unavailable,
    });
    rows.push({
      pool: pool.poolId,
      name: pool.name,
      model: '*',
      ...counts(pool),
      queued: pool.queuedReservations ? `${pool.queuedReservations} (${pool.queuedGpus} GPUs)` : '0',
    });
    for (const model of pool.models)
      rows.push({ pool: pool.poolId, name: pool.name, model: model.gpuModel, ...counts(model), queued: '' });
  }
  return rows;
}

export default defineCommand({
  name: 'capacity',
  group: 'Capacity',
  summary: 'GPUs per pool and model (capacity.get); --preview: would a reservation fit (capacity.preview)',
  target: 'token',
  calls: ['capacity.get', 'capacity.preview'],
  flags: {
    pool: { type: 'id', kind: 'pool', description: 'One pool (required with --preview)' },
    preview: { type: 'boolean', description: 'Whether --gpus for --for would fit now, where, or when' },
    gpus: { type: 'number', integer: true, min: 1, max: 4096, description: 'GPUs (with --preview)' },
    for: {
      type: 'duration',
      min: '1m',
      max: '30d',
      description: 'How long, such as 8h or 1d, 1m to 30d (with --preview)',
      placeholder: 'DURATION',
    },
    ...matchFlags,
  },
  defaultFormat: (flags) => (flags.preview ? 'json' : 'table'),
  tableRows: capacityRows,
  examples: [
    'better-compute capacity',
    'better-compute capacity --pool pool_01k…',
    'better-compute capacity --preview --pool pool_01k… --gpus 8 --for 1d --selector "vramGiB >= 80"',
  ],
  async run({ flags, api }) {
    if (!flags.preview) {
      for (const name of ['gpus', 'for', 'selector', 'model', 'product'] as const) {
        if (flags[name] !== undefined)
          throw new CliError('INVALID_ARGUMENT', `--${name} needs --preview`, { details: { field: name } });
      }
      for (const name of ['nvlink', 'tolerate'] as const) {
        if (name === 'nvlink' ? flags.nvlink : flags.tolerate.length > 0)
          throw new CliError('INVALID_ARGUMENT', `--${name} needs --preview`, { details: { field: name } });
      }
      return (await api()).call('capacity.get', flags.pool ? { poolId: flags.pool } : {});
    }
    for (const name of ['pool', 'gpus', 'for'] as const) {
      if (flags[name] === undefined)
        throw new CliError('INVALID_ARGUMENT', `capacity --preview needs --${name}`, {
          hint: 'Run "better-compute help capacity" for its flags and examples.',
          details: { field: name },
        });
    }
    await checkSelector(flags.selector);
    return (await api()).call('capacity.preview', {
      poolId: flags.pool!,
      gpus: flags.gpus!,
      durationSeconds: flags.for!,
      nvlink: flags.nvlink,
      ...(flags.selector !== undefined ? { selector: flags.selector } : {}),
      ...(flags.model !== undefined ? { gpuModel: flags.model } : {}),
      ...(flags.product !== undefined ? { gpuProduct: flags.product } : {}),
      ...(flags.tolerate.length ? { tolerations: flags.tolerate } : {}),
    });
  },
});
