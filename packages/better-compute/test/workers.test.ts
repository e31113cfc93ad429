/** The worker loop's maintenance: expired idempotency keys go, and a PGlite database is vacuumed. */
import { migrate, openDatabase } from '@better-compute/db';
import { type Kysely, sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { foundationMigrations } from '../src/db/migrations.js';
import type { ComputeTables } from '../src/db/tables.js';
import { startWorkerLoop } from '../src/workers/runner.js';

describe('worker maintenance', () => {
  it('forgets expired idempotency keys and vacuums a database without autovacuum', async () => {
    const database = await openDatabase({ pglite: {} });
    const db = database.db as Kysely<ComputeTables>;
    try {
      await migrate(db, [foundationMigrations]);
      const now = new Date('2026-03-01T00:00:00Z');
      await sql`
        insert into compute.idempotency_keys (scope_hash, tenant_id, method, input_hash, expires_at)
        values ('old', 'acme', 'm', 'h', ${new Date(now.getTime() - 1000)}),
               ('live', 'acme', 'm', 'h', ${new Date(now.getTime() + 3_600_000)})`.execute(db);
      const vacuums = async () =>
        Number(
          (
            await sql<{ n: string }>`
              select coalesce(sum(vacuum_count), 0) as n from pg_stat_user_tables
              where schemaname = 'compute' and relname = 'idempotency_keys'`.execute(db)
          ).rows[0]!.n,
        );
      expect(await vacuums()).toBe(0);
      const loop = startWorkerLoop({
        db,
        jobs: {},
        maintenance: true,
        vacuum: true,
        now: () => now,
        log: () => {},
        pollMs: 10,
      });
      try {
        const deadline = Date.now() + 10_000;
        while ((await vacuums()) === 0 && Date.now() < deadline)
          await new Promise((resolve) => setTimeout(resolve, 20));
      } finally {
        await loop.stop();
      }
      expect(await vacuums()).toBeGreaterThan(0);
      const keys = await sql<{ scope_hash: string }>`select scope_hash from compute.idempotency_keys`.execute(
        db,
      );
      expect(keys.rows.map((r) => r.scope_hash)).toEqual(['live']);
    } finally {
      await database.close();
    }
  });
});
