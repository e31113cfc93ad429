/** The workflows module's gauge (workers/gauges.ts): unfinished workflows by state. */
import { sql } from 'kysely';
import type { ModuleGauges } from '../define-module.js';

export const workflowGauges: ModuleGauges = async (db) => {
  const { rows } = await sql<{ state: string; count: number }>`
    select state, count(*)::int as count from compute.workflows
    where state in ('running', 'paused') group by state order by state`.execute(db);
  return [
    {
      name: 'workflows_open',
      help: 'Workflows not finished, by state',
      samples: rows.map((row) => ({ labels: { state: row.state }, value: row.count })),
    },
  ];
};
