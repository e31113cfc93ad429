/**
 * Fleet migration 0003 moves who holds a GPU into its group's row and folds per-GPU bindings into one
 * row per reservation, node and group: a database with bindings on record keeps every one of them.
 * Migration 0011 moves a group's counter and slots to the end of its row, keeping their values.
 */
import { migrate, openDatabase } from '@better-compute/db';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { foundationMigrations } from '../src/db/migrations.js';
import { fleetMigrations } from '../src/modules/fleet/migrations.js';

describe('fleet migration 0003_group_holders', () => {
  it('keeps every binding and who holds each GPU', async () => {
    const database = await openDatabase({ pglite: {} });
    const db = database.db;
    try {
      const upTo = (name: string) => [
        foundationMigrations,
        {
          module: 'fleet',
          migrations: fleetMigrations.slice(
            0,
            fleetMigrations.findIndex((m) => m.name === name),
          ),
        },
      ];
      await migrate(db, upTo('0003_group_holders'));
      const at = '2026-01-01T00:00:00Z';
      await sql`insert into compute.sites (id, tenant_id, name, created_at, updated_at)
        values ('site_1', 'ops', 's', ${at}, ${at})`.execute(db);
      await sql`insert into compute.pools (id, tenant_id, site_id, name, class, driver, created_at, updated_at)
        values ('pool_1', 'ops', 'site_1', 'p', 'gpu', 'sim', ${at}, ${at})`.execute(db);
      await sql`insert into compute.nodes (id, tenant_id, pool_id, name, state, cpu_cores, memory_gib, inventory,
          gpu_count, free_gpus, state_changed_at, created_at, updated_at)
        values ('node_1', 'ops', 'pool_1', 'n1', 'ready', 8, 64, '{}', 6, 3, ${at}, ${at}, ${at})`.execute(
        db,
      );
      // Two groups: GPUs 0-3 (one NVLink domain) and 4-5 (none).
      await sql`insert into compute.gpu_groups (node_id, group_no, pool_id, model, product, vram_gib, nvlink_domain, total, free)
        values ('node_1', 0, 'pool_1', 'H100', 'H100-SXM5-80GB', 80, 'nvl-a', 4, 1),
               ('node_1', 1, 'pool_1', 'L40S', 'L40S-48GB', 48, null, 2, 2)`.execute(db);
      await sql`insert into compute.gpus (node_id, idx, group_no, pool_id, model, product, vram_gib, nvlink_domain, reservation_id)
        select 'node_1', i, case when i < 4 then 0 else 1 end, 'pool_1', 'm', 'p', 80, null,
          case when i in (1, 2, 3) then 'reservation_live' end
        from generate_series(0, 5) i`.execute(db);
      await sql`insert into compute.reservations (id, tenant_id, pool_id, state, gpus, duration_seconds, nvlink,
          created_at, activated_at, ends_at, ended_at, end_reason)
        values ('reservation_live', 'acme', 'pool_1', 'active', 3, 3600, true, ${at}, ${at}, '2026-01-01T01:00:00Z', null, null),
               ('reservation_done', 'acme', 'pool_1', 'ended', 2, 600, false, ${at}, ${at}, '2026-01-01T00:10:00Z',
                '2026-01-01T00:05:00Z', 'released')`.execute(db);
      await sql`insert into compute.gpu_bindings (reservation_id, tenant_id, pool_id, node_id, gpu_index, group_no, model,
          product, nvlink_domain, bound_at, released_at)
        values ('reservation_done', 'acme', 'pool_1', 'node_1', 0, 0, 'H100', 'H100-SXM5-80GB', 'nvl-a', ${at}, '2026-01-01T00:05:00Z'),
               ('reservation_done', 'acme', 'pool_1', 'node_1', 4, 1, 'L40S', 'L40S-48GB', null, ${at}, '2026-01-01T00:05:00Z'),
               ('reservation_live', 'acme', 'pool_1', 'node_1', 1, 0, 'H100', 'H100-SXM5-80GB', 'nvl-a', ${at}, null),
               ('reservation_live', 'acme', 'pool_1', 'node_1', 2, 0, 'H100', 'H100-SXM5-80GB', 'nvl-a', ${at}, null),
               ('reservation_live', 'acme', 'pool_1', 'node_1', 3, 0, 'H100', 'H100-SXM5-80GB', 'nvl-a', ${at}, null)`.execute(
        db,
      );

      await migrate(db, [foundationMigrations, { module: 'fleet', migrations: fleetMigrations }]);

      const groups = (
        await sql<{ group_no: number; gpu_indices: number[]; holders: (string | null)[]; free: number }>`
          select group_no, gpu_indices, holders, free from compute.gpu_groups order by group_no`.execute(db)
      ).rows;
      expect(groups).toEqual([
        {
          group_no: 0,
          gpu_indices: [0, 1, 2, 3],
          holders: [null, 'reservation_live', 'reservation_live', 'reservation_live'],
          free: 1,
        },
        { group_no: 1, gpu_indices: [4, 5], holders: [null, null], free: 2 },
      ]);
      const bindings = (
        await sql<{
          reservation_id: string;
          group_no: number;
          gpu_indices: number[];
          gpu_count: number;
          released: boolean;
        }>`
          select reservation_id, group_no, gpu_indices, gpu_count, released_at is not null as released
          from compute.gpu_bindings order by reservation_id, group_no`.execute(db)
      ).rows;
      expect(bindings).toEqual([
        { reservation_id: 'reservation_done', group_no: 0, gpu_indices: [0], gpu_count: 1, released: true },
        { reservation_id: 'reservation_done', group_no: 1, gpu_indices: [4], gpu_count: 1, released: true },
        {
          reservation_id: 'reservation_live',
          group_no: 0,
          gpu_indices: [1, 2, 3],
          gpu_count: 3,
          released: false,
        },
      ]);
      // New bindings number after the old ones, and a group's free count cannot disagree with its slots.
      const next = await sql<{ id: number }>`
        insert into compute.gpu_bindings (reservation_id, tenant_id, pool_id, node_id, group_no, gpu_indices, gpu_count,
          model, product, bound_at)
        values ('reservation_live', 'acme', 'pool_1', 'node_1', 1, '{5}', 1, 'L40S', 'L40S-48GB', ${at})
        returning id::int as id`.execute(db);
      expect(next.rows[0]!.id).toBeGreaterThan(5);
      await expect(
        sql`update compute.gpu_groups set free = 0 where group_no = 1`.execute(db),
      ).rejects.toThrow(/gpu_groups_free_slots/);
      // The counter and the slots are the row's last columns, so the WAL record of a reserve's
      // update in place logs only them (0011), and they are as checked as before.
      const columns = await sql<{ name: string }>`
        select attname as name from pg_attribute
        where attrelid = 'compute.gpu_groups'::regclass and attnum > 0 and not attisdropped
        order by attnum`.execute(db);
      expect(columns.rows.map((r) => r.name).slice(-2)).toEqual(['free', 'holders']);
      await expect(
        sql`update compute.gpu_groups set free = -1, holders = '{}' where group_no = 1`.execute(db),
      ).rejects.toThrow(/gpu_groups_free/);
    } finally {
      await database.close();
    }
  });
});
