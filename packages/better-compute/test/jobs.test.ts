import { describe, expect, it } from 'vitest';
import { createTestDatabase, testDatabaseKinds } from '@better-compute/db/testing';
import { migrate } from '@better-compute/db';
import type { Kysely } from 'kysely';
import { foundationMigrations } from '../src/db/migrations.js';
import type { ComputeTables } from '../src/db/tables.js';
import { claimJobs, completeJob, enqueueJob, failJob } from '../src/workers/jobs.js';
import { acquireLease } from '../src/workers/leases.js';

const kinds = await testDatabaseKinds();

describe.each(kinds)('jobs and leases on %s', (kind) => {
  it('runners claiming at once never take the same job, and every job is taken', async () => {
    const database = await createTestDatabase(kind, 12);
    try {
      await migrate(database.db, [foundationMigrations]);
      const db = database.db as Kysely<ComputeTables>;
      const ids = new Set<string>();
      for (let i = 0; i < 40; i++) ids.add(await enqueueJob(db, { kind: 'sweep', payload: { i } }));
      const now = new Date(Date.now() + 1000);
      const claimed = await Promise.all(
        Array.from({ length: 6 }, (_, r) =>
          (async () => {
            const mine: string[] = [];
            for (;;) {
              const batch = await claimJobs(db, {
                kinds: ['sweep'],
                runner: `r${r}`,
                limit: 3,
                leaseMs: 60_000,
                now,
              });
              if (batch.length === 0) return mine;
              for (const job of batch) {
                mine.push(job.id);
                await completeJob(db, job.id, `r${r}`, now);
              }
            }
          })(),
        ),
      );
      const all = claimed.flat();
      expect(all).toHaveLength(40);
      expect(new Set(all)).toEqual(ids);
    } finally {
      await database.close();
    }
  });

  it('a failed job is retried later; a claim that lapses is taken again', async () => {
    const database = await createTestDatabase(kind);
    try {
      await migrate(database.db, [foundationMigrations]);
      const db = database.db as Kysely<ComputeTables>;
      await enqueueJob(db, { kind: 'flaky', maxAttempts: 2 });
      const t0 = new Date(Date.now() + 1000);
      const [job] = await claimJobs(db, { kinds: ['flaky'], runner: 'a', limit: 1, leaseMs: 1000, now: t0 });
      await failJob(db, job!, 'a', 'boom', t0);
      expect(
        await claimJobs(db, { kinds: ['flaky'], runner: 'a', limit: 1, leaseMs: 1000, now: t0 }),
      ).toEqual([]);
      const t1 = new Date(t0.getTime() + 5000);
      const [again] = await claimJobs(db, {
        kinds: ['flaky'],
        runner: 'a',
        limit: 1,
        leaseMs: 1000,
        now: t1,
      });
      expect(again?.attempts).toBe(2);
      // Runner a dies holding it; after the lease, runner b takes it.
      const t2 = new Date(t1.getTime() + 2000);
      const [taken] = await claimJobs(db, {
        kinds: ['flaky'],
        runner: 'b',
        limit: 1,
        leaseMs: 1000,
        now: t2,
      });
      expect(taken?.id).toBe(job!.id);
    } finally {
      await database.close();
    }
  });

  it('one holder at a time holds a lease, and another takes it once it lapses', async () => {
    const database = await createTestDatabase(kind);
    try {
      await migrate(database.db, [foundationMigrations]);
      const db = database.db as Kysely<ComputeTables>;
      const now = new Date();
      const results = await Promise.all(
        ['a', 'b', 'c'].map((holder) => acquireLease(db, { name: 'leader', holder, ttlMs: 1000, now })),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
      const later = new Date(now.getTime() + 1500);
      expect(await acquireLease(db, { name: 'leader', holder: 'z', ttlMs: 1000, now: later })).toBe(true);
      expect(await acquireLease(db, { name: 'leader', holder: 'a', ttlMs: 1000, now: later })).toBe(false);
    } finally {
      await database.close();
    }
  });
});
