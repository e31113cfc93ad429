/**
 * The outbox tells listeners when it grows: every statement that inserts events sends one
 * `better_compute_events` notification per tenant it wrote for, inside the writing transaction, so
 * PostgreSQL delivers it when (and only if) the transaction commits. The live stream wakes on it
 * (src/live/). Since 0002 only for tenants a live stream watches (compute.live_watches). Never edit
 * a migration once it has landed; add one.
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
  {
    // NOTIFY serialises commits: a notifying transaction takes one cluster-wide lock before its
    // commit record and holds it through the commit's flush, so every mutation queued behind the
    // others' fsyncs (docs/decisions/reserve-notify.md). The outbox now tells only the tenants some
    // live stream watches: each process with a stream of a tenant keeps a row here, renewed while
    // its streams are open, and the trigger notifies for a tenant only while such a row is current.
    name: '0002_events_notify_watched',
    sql: `
create table compute.live_watches (
  tenant_id text primary key,
  watched_until timestamptz not null
);
create or replace function compute.events_notify() returns trigger language plpgsql as $$
begin
  perform pg_notify('${EVENTS_CHANNEL}', t.tenant_id)
  from (select distinct tenant_id from added) as t
  where exists (
    select 1 from compute.live_watches w where w.tenant_id = t.tenant_id and w.watched_until > now());
  return null;
end
$$;
`,
  },
];
