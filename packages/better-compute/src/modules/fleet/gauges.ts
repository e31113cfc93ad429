/** The fleet's gauges (workers/gauges.ts): reservations and queue depth by pool, nodes by state. */
import { sql } from 'kysely';
import type { ModuleGauges } from '../define-module.js';

export const fleetGauges: ModuleGauges = async (db) => {
  // Both read the partial index of reservations holding or waiting (reservations_holding).
  const { rows: holding } = await sql<{ pool_id: string; state: string; count: number; gpus: number }>`
    select pool_id, state, count(*)::int as count, coalesce(sum(gpus), 0)::int as gpus
    from compute.reservations where state in ('queued', 'active')
    group by pool_id, state order by pool_id, state`.execute(db);
  const { rows: nodes } = await sql<{ pool_id: string | null; state: string; count: number }>`
    select pool_id, state, count(*)::int as count from compute.nodes
    group by pool_id, state order by pool_id, state`.execute(db);
  return [
    {
      name: 'reservations',
      help: 'Reservations by pool and state: active ones hold GPUs, queued ones are the pool’s queue',
      samples: holding.map((row) => ({ labels: { pool: row.pool_id, state: row.state }, value: row.count })),
    },
    {
      name: 'reservation_gpus',
      help: 'GPUs held (active) or asked for (queued) by reservations, by pool',
      samples: holding.map((row) => ({ labels: { pool: row.pool_id, state: row.state }, value: row.gpus })),
    },
    {
      name: 'nodes',
      help: 'Nodes by pool and state',
      samples: nodes.map((row) => ({
        labels: { pool: row.pool_id ?? '', state: row.state },
        value: row.count,
      })),
    },
  ];
};
