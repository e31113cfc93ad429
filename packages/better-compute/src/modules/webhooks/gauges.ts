/**
 * The webhooks module's gauges (workers/gauges.ts): deliveries waiting and how long the oldest has
 * waited, and how far the fan-out's cursor is behind the outbox.
 */
import { sql } from 'kysely';
import { type ModuleGauges, secondsSince } from '../define-module.js';

export const webhookGauges: ModuleGauges = async (db, now) => {
  // The partial index webhook_deliveries_due holds the pending rows.
  const { rows: pending } = await sql<{ count: number; oldest: Date | string | null }>`
    select count(*)::int as count, min(created_at) as oldest from compute.webhook_deliveries
    where state = 'pending'`.execute(db);
  // The oldest event the fan-out has not read yet; none when it is caught up or has never run.
  const { rows: unread } = await sql<{ occurred_at: Date | string }>`
    select e.occurred_at from compute.events e, compute.webhook_cursor c
    where c.name = 'fanout' and (e.tx_id, e.tx_index) > (c.tx_id, c.tx_index)
    order by e.tx_id, e.tx_index limit 1`.execute(db);
  const row = pending[0] ?? { count: 0, oldest: null };
  return [
    {
      name: 'webhook_deliveries_pending',
      help: 'Webhook deliveries not yet delivered or given up',
      samples: [{ labels: {}, value: row.count }],
    },
    {
      name: 'webhook_delivery_lag_seconds',
      help: 'How long the oldest pending webhook delivery has waited (0 when none waits)',
      samples: [{ labels: {}, value: secondsSince(row.oldest, now) }],
    },
    {
      name: 'outbox_lag_seconds',
      help: 'How long the oldest event the webhook fan-out has not read has waited (0 when caught up)',
      samples: [{ labels: {}, value: secondsSince(unread[0]?.occurred_at, now) }],
    },
  ];
};
