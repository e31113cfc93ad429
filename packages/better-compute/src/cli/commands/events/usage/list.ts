/**
 * `usage list`: GPU-seconds per tenant, pool and GPU model, per hour; a table by default. --from
 * and --to are used as given: each window is its hour cut to [--from, --to), and windowStart and
 * windowEnd say where it was cut. --cursor is the opaque cursor a previous page ended with.
 */
import { defineCommand, type IdFlag, type StringFlag } from '../../../define.js';
import { CliError } from '../../../errors.js';
import { listResult, pageFlags, pageOf } from '../../shared.js';

/** The flags usage list and usage export share: which pool, and the period. */
export const usageFilterFlags = {
  pool: { type: 'id', kind: 'pool', description: 'Only this pool' },
  from: {
    type: 'string',
    description:
      'From this time, inclusive (default: 24 hours before --to); the first hour window starts here',
    placeholder: 'TIME',
  },
  to: {
    type: 'string',
    description: 'Until this time, exclusive (default: now); the last hour window ends here',
    placeholder: 'TIME',
  },
} as const satisfies { pool: IdFlag; from: StringFlag; to: StringFlag };

/** Checks --from and --to locally: ISO 8601 times with an offset, as the server takes them. */
export function checkTimes(flags: { from?: string | undefined; to?: string | undefined }): void {
  for (const name of ['from', 'to'] as const) {
    const value = flags[name];
    if (
      value !== undefined &&
      (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(value) ||
        Number.isNaN(Date.parse(value)))
    ) {
      throw new CliError(
        'INVALID_ARGUMENT',
        `--${name} must be a time like 2026-01-01T00:00:00Z (got "${value}")`,
        {
          details: { field: name },
        },
      );
    }
  }
}

export default defineCommand({
  name: 'usage list',
  group: 'Events',
  summary: 'GPU-seconds per tenant, pool and GPU model, per hour (usage.list)',
  target: 'token',
  calls: ['usage.list'],
  flags: {
    ...usageFilterFlags,
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: [
    'better-compute usage list',
    'better-compute usage list --pool pool_01k… --from 2026-01-01T00:00:00Z',
  ],
  async run({ flags, api, global }) {
    checkTimes(flags);
    const page = await (
      await api()
    ).call('usage.list', {
      ...(flags.pool ? { poolId: flags.pool } : {}),
      ...(flags.from ? { from: flags.from } : {}),
      ...(flags.to ? { to: flags.to } : {}),
      ...pageOf(flags),
    });
    return listResult({ global }, page, (u) => ({
      window: u.windowStart,
      tenant: u.tenantId,
      pool: u.poolId,
      model: u.gpuModel,
      gpuSeconds: u.gpuSeconds,
      gpuHours: Math.round((u.gpuSeconds / 3600) * 100) / 100,
    }));
  },
});
