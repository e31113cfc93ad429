/**
 * The outbox tells listeners when it grows: every statement that inserts events sends one
 * `better_compute_events` notification per tenant it wrote for, inside the writing transaction, so
 * PostgreSQL delivers it when (and only if) the transaction commits. The live stream wakes on it
 * (src/live/). Never edit a migration once it has landed; add one.
 */
import type { Migration } from '@better-compute/db';

export const EVENTS_CHANNEL = 'better_compute_events';

export const eventsMigrations: readonly Migration[] = [
  {
    name: '0001_events_notify',
    sql: `
create function compute.events_notify() returns trigger language plpgsql as $$
begin
  perform pg_notify('${EVENTS_CHANNEL}', tenant_id) from (select distinct tenant_id from added) as tenants;
  return null;
end
$$;
create trigger events_notify after insert on compute.events
  referencing new table as added
  for each statement execute function compute.events_notify();
`,
  },
];
