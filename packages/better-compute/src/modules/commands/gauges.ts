/** The commands module's gauges (workers/gauges.ts): open commands by state, node sessions by gateway. */
import { sql } from 'kysely';
import type { ModuleGauges } from '../define-module.js';

export const commandGauges: ModuleGauges = async (db) => {
  // The partial index commands_open holds exactly these rows.
  const { rows: open } = await sql<{ state: string; held: boolean; count: number }>`
    select state, held, count(*)::int as count from compute.commands
    where state in ('queued', 'sent', 'running') group by state, held order by state, held`.execute(db);
  const { rows: sessions } = await sql<{ gateway_id: string; count: number }>`
    select gateway_id, count(*)::int as count from compute.node_sessions
    group by gateway_id order by gateway_id`.execute(db);
  return [
    {
      name: 'commands_open',
      help: 'Commands not finished, by state; held ones wait for their batch’s approval',
      samples: open.map((row) => ({
        labels: { state: row.state, held: String(row.held) },
        value: row.count,
      })),
    },
    {
      name: 'node_sessions',
      help: 'Node daemons with a session, by the gateway that holds it',
      samples: sessions.map((row) => ({ labels: { gateway: row.gateway_id }, value: row.count })),
    },
  ];
};
