/**
 * The deployment's gauges for `/metrics` (host/metrics.ts): each module's own (reservations and
 * queue depth by pool, nodes, open commands and workflows, node sessions by gateway, webhook
 * deliveries and the outbox's lag), the job queue's lag, and this replica's database pool.
 */
import type { Database } from '@better-compute/db';
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import { type ComputeModule, type GaugeFamily, secondsSince } from '../modules/define-module.js';

/** The oldest job that is due and not yet claimed: how far the workers are behind. */
async function jobGauges(db: Kysely<ComputeTables>, now: Date): Promise<GaugeFamily[]> {
  const { rows } = await sql<{ due: number; oldest: Date | string | null }>`
    select count(*)::int as due, min(run_at) as oldest from compute.jobs
    where state = 'queued' and run_at <= ${now}`.execute(db);
  const row = rows[0] ?? { due: 0, oldest: null };
  return [
    { name: 'jobs_due', help: 'Background jobs due now and not yet claimed', samples: [sample({}, row.due)] },
    {
      name: 'jobs_lag_seconds',
      help: 'How long the oldest due job has waited to be claimed (0 when none waits)',
      samples: [sample({}, secondsSince(row.oldest, now))],
    },
  ];
}

function sample(labels: Record<string, string>, value: number) {
  return { labels, value };
}

export async function collectGauges(
  modules: readonly ComputeModule[],
  db: Kysely<ComputeTables>,
  database: Pick<Database, 'poolUse'>,
  now: Date,
): Promise<GaugeFamily[]> {
  const families = await jobGauges(db, now);
  for (const module of modules) if (module.gauges) families.push(...(await module.gauges(db, now)));
  const use = database.poolUse?.();
  if (use)
    families.push({
      name: 'database_pool_connections',
      help: 'This replica’s PostgreSQL connections: open, idle, callers waiting, and the pool’s size',
      samples: [
        sample({ state: 'open' }, use.total),
        sample({ state: 'idle' }, use.idle),
        sample({ state: 'waiting' }, use.waiting),
        sample({ state: 'max' }, use.max),
      ],
    });
  return families;
}
