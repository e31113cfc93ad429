/**
 * Foundation migration 0002 makes an event's position its primary key: the events on record stay,
 * a position is still unique, and an id needs no index of its own.
 */
import { migrate, openDatabase } from '@better-compute/db';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { foundationMigrations } from '../src/db/migrations.js';

describe('foundation migration 0002_event_position_key', () => {
  it('keeps the events on record and keys them by position', async () => {
    const database = await openDatabase({ pglite: {} });
    const db = database.db;
    try {
      const first = foundationMigrations.migrations.findIndex((m) => m.name === '0002_event_position_key');
      await migrate(db, [{ module: 'compute', migrations: foundationMigrations.migrations.slice(0, first) }]);
      await sql`insert into compute.events (id, tx_id, tx_index, tenant_id, type, subject_type)
        values ('event_a', '100', 0, 'acme', 'reservation.created', 'reservation'),
               ('event_b', '100', 1, 'acme', 'reservation.activated', 'reservation')`.execute(db);
      await migrate(db, [foundationMigrations]);
      const kept = await sql<{ id: string }>`select id from compute.events order by tx_id, tx_index`.execute(
        db,
      );
      expect(kept.rows.map((r) => r.id)).toEqual(['event_a', 'event_b']);
      const key = await sql<{ column: string }>`
        select a.attname as column from pg_index i
        join pg_attribute a on a.attrelid = i.indrelid and a.attnum = any(i.indkey)
        where i.indrelid = 'compute.events'::regclass and i.indisprimary
        order by array_position(i.indkey::int2[], a.attnum)`.execute(db);
      expect(key.rows.map((r) => r.column)).toEqual(['tx_id', 'tx_index']);
      const indexedById = await sql<{ n: number }>`
        select count(*)::int as n from pg_indexes
        where schemaname = 'compute' and tablename = 'events' and indexdef like '%(id)%'`.execute(db);
      expect(indexedById.rows[0]!.n).toBe(0);
      await expect(
        sql`insert into compute.events (id, tx_id, tx_index, tenant_id, type, subject_type)
          values ('event_c', '100', 1, 'acme', 'reservation.released', 'reservation')`.execute(db),
      ).rejects.toMatchObject({ code: '23505' });
    } finally {
      await database.close();
    }
  });
});
