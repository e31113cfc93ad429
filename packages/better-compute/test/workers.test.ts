/**
 * The worker loop: a job queued with `wake` runs at once rather than at the next poll, and its
 * maintenance: expired idempotency keys go, and a PGlite database is vacuumed.
 */
import { listenOn, migrate, openDatabase } from '@better-compute/db';
import { createTestDatabase, testDatabaseKinds } from '@better-compute/db/testing';
import { type Kysely, sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { foundationMigrations } from '../src/db/migrations.js';
import type { ComputeTables } from '../src/db/tables.js';
import { enqueueJob, JOBS_CHANNEL } from '../src/workers/jobs.js';
import { startWorkerLoop } from '../src/workers/runner.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('worker maintenance', { timeout: 120_000 }, () => {
  it('forgets expired idempotency keys and vacuums a database without autovacuum', async () => {
    const database = await openDatabase({ pglite: {} });
    const db = database.db as Kysely<ComputeTables>;
    try {
      await migrate(db, [foundationMigrations]);
      const now = new Date('2026-03-01T00:00:00Z');
      await sql`
        insert into compute.idempotency_keys (scope_hash, tenant_id, method, input_hash, answer, expires_at)
        values ('old', 'acme', 'm', 'h', '\\x006e756c6c', ${new Date(now.getTime() - 1000)}),
               ('live', 'acme', 'm', 'h', '\\x006e756c6c', ${new Date(now.getTime() + 3_600_000)})`.execute(
        db,
      );
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
      const keys = await sql<{ scope: string }>`
        select convert_from(scope_hash, 'UTF8') as scope from compute.idempotency_keys`.execute(db);
      expect(keys.rows.map((r) => r.scope)).toEqual(['live']);
    } finally {
      await database.close();
    }
  });

  it('renews the claim of a job that outlives the lease, so a second runner never takes it', async () => {
    const database = await openDatabase({ pglite: {} });
    const db = database.db as Kysely<ComputeTables>;
    const runs: string[] = [];
    const loops = ['a', 'b'].map((name) =>
      startWorkerLoop({
        db,
        jobs: {
          slow: async () => {
            runs.push(name);
            await sleep(1_000);
          },
        },
        maintenance: false,
        now: () => new Date(),
        log: () => {},
        pollMs: 20,
        leaseMs: 300,
      }),
    );
    try {
      await migrate(db, [foundationMigrations]);
      await enqueueJob(db, { kind: 'slow' });
      const deadline = Date.now() + 5_000;
      let state = '';
      while (state !== 'done' && Date.now() < deadline) {
        await sleep(50);
        state = (await db.selectFrom('compute.jobs').select('state').executeTakeFirst())?.state ?? '';
      }
      expect(state).toBe('done');
      // The job ran three times as long as the lease, on one runner only.
      expect(runs).toHaveLength(1);
    } finally {
      await Promise.all(loops.map((loop) => loop.stop()));
      await database.close();
    }
  });

  it('takes over the job of a runner that died, once its claim lapses', async () => {
    const database = await openDatabase({ pglite: {} });
    const db = database.db as Kysely<ComputeTables>;
    try {
      await migrate(db, [foundationMigrations]);
      const id = await enqueueJob(db, { kind: 'work' });
      // A runner that claimed the job and then died: its claim is never renewed.
      await sql`update compute.jobs set state = 'running', locked_by = 'dead',
        locked_until = now() + interval '300 milliseconds', attempts = 1 where id = ${id}`.execute(db);
      const ran: number[] = [];
      const started = Date.now();
      const loop = startWorkerLoop({
        db,
        jobs: { work: async () => void ran.push(Date.now() - started) },
        maintenance: false,
        now: () => new Date(),
        log: () => {},
        pollMs: 20,
        leaseMs: 300,
      });
      try {
        const deadline = Date.now() + 5_000;
        while (ran.length === 0 && Date.now() < deadline) await sleep(20);
      } finally {
        await loop.stop();
      }
      expect(ran).toHaveLength(1);
      expect(ran[0]).toBeGreaterThanOrEqual(250);
      const row = await db.selectFrom('compute.jobs').select(['state', 'attempts']).executeTakeFirstOrThrow();
      expect(row).toEqual({ state: 'done', attempts: 2 });
    } finally {
      await database.close();
    }
  });
});

describe.each(await testDatabaseKinds())('waking the worker loop on %s', (kind) => {
  it('a job queued with wake runs when its transaction commits, not at the next poll a minute later', async () => {
    const database = await createTestDatabase(kind);
    const db = database.db as Kysely<ComputeTables>;
    await migrate(db, [foundationMigrations]);
    const ran: number[] = [];
    const loop = startWorkerLoop({
      db,
      jobs: { 'test.wake': async () => void ran.push(Date.now()) },
      maintenance: false,
      now: () => new Date(),
      log: () => {},
      pollMs: 60_000,
      listen: (wake) => listenOn(database, [JOBS_CHANNEL], { notification: wake }),
    });
    try {
      // The loop's first poll happened before the job existed; the next is a minute away.
      await sleep(300);
      let committedAt = 0;
      await db.transaction().execute(async (trx) => {
        await enqueueJob(trx, { kind: 'test.wake', wake: true });
        // Not before the commit: the job is not there to claim yet.
        await sleep(200);
        expect(ran).toEqual([]);
        committedAt = Date.now();
      });
      const deadline = Date.now() + 10_000;
      while (ran.length === 0 && Date.now() < deadline) await sleep(10);
      expect(ran).toHaveLength(1);
      expect(ran[0]! - committedAt).toBeLessThan(5_000);
      // Without wake, the job waits for the poll.
      await enqueueJob(db, { kind: 'test.wake' });
      await sleep(1_000);
      expect(ran).toHaveLength(1);
    } finally {
      await loop.stop();
      await database.close();
    }
  });
});
