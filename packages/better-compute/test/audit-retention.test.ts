/**
 * Outbox retention never reaches the audit log: the maintenance pass of a controllers replica
 * deletes events past `events.retention`, and every audit entry, sealed or not, stays; the log
 * still verifies afterwards. Also the checkpoint job and doctor's `audit.sealed` check.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabaseKinds } from '@better-compute/db/testing';
import { sql } from 'kysely';
import { verifyAuditLog } from '../src/audit/verify.js';
import { writeEvents } from '../src/db/unit-of-work.js';
import { startWorkerLoop } from '../src/workers/runner.js';
import { auditFixture, sealUntil, writeEntries, type AuditFixture } from './audit-support.js';

const kinds = await testDatabaseKinds();
const DAY = 86_400_000;

describe.runIf(kinds.includes('postgres'))('outbox retention and the audit log (postgres)', () => {
  let f: AuditFixture;
  beforeAll(async () => {
    f = await auditFixture();
  });
  afterAll(async () => {
    await f?.close();
  });

  it('drops old events, keeps recent ones and every audit entry', async () => {
    const meta = { tenantId: 'acme', actor: null, requestId: 'req_retention' };
    for (const name of ['old-1', 'old-2', 'new']) {
      await f.db
        .transaction()
        .execute((trx) =>
          writeEvents(
            trx,
            [{ type: 'test.written', subject: { type: 'test', id: null }, data: { name } }],
            meta,
          ),
        );
    }
    await sql`update compute.events set occurred_at = now() - interval '40 days' where data->>'name' like 'old-%'`.execute(
      f.db,
    );
    // Every audit entry is older than the retention: sealed or not, none may go.
    const age = () =>
      sql`update compute.audit_events set occurred_at = now() - interval '400 days' where leaf_index is null`.execute(
        f.db,
      );
    await writeEntries(f.db, 'acme', 4);
    await age();
    await sealUntil(f, 'acme', 4);
    await writeEntries(f.db, 'acme', 2, 4);
    await age();

    const logs: string[] = [];
    const loop = startWorkerLoop({
      db: f.db,
      jobs: {},
      maintenance: true,
      now: () => new Date(),
      log: (entry) => logs.push(entry.message),
      pollMs: 20,
      eventRetentionMs: 30 * DAY,
    });
    try {
      for (let i = 0; i < 200; i++) {
        // The seal's own `audit.checkpoint` events are recent: they stay beside 'new'.
        const left = await f.db
          .selectFrom('compute.events')
          .select('data')
          .where('type', '=', 'test.written')
          .execute();
        if (left.length === 1) break;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    } finally {
      await loop.stop();
    }
    const kept = await f.db.selectFrom('compute.events').select(['type', 'data']).execute();
    expect(kept.filter((row) => row.type === 'test.written').map((row) => row.data.name)).toEqual(['new']);
    const published = kept
      .filter((row) => row.type === 'audit.checkpoint')
      .map((row) => Number(row.data.size));
    expect(Math.max(...published)).toBe(4);
    expect(kept.every((row) => row.type === 'test.written' || row.type === 'audit.checkpoint')).toBe(true);
    expect(logs).toEqual([]);
    const audit = await f.db.selectFrom('compute.audit_events').select(['id', 'leaf_index']).execute();
    expect(audit).toHaveLength(6);
    expect(audit.filter((row) => row.leaf_index !== null)).toHaveLength(4);
    expect(await verifyAuditLog(f.db, { tenantId: 'acme', pin: f.pin })).toMatchObject({
      ok: true,
      entries: 4,
      unsealed: 2,
    });
  });
});

describe.runIf(kinds.includes('postgres'))('the audit.checkpoint job (postgres)', () => {
  let f: AuditFixture;
  beforeAll(async () => {
    f = await auditFixture();
  });
  afterAll(async () => {
    await f?.close();
  });

  it('seals under its lease, queues its next run, and says once why it could not run', async () => {
    const { checkpointJob, queueCheckpoint, AUDIT_CHECKPOINT_JOB } = await import('../src/audit/job.js');
    const logs: { level: string; message: string }[] = [];
    let failing = false;
    const job = checkpointJob({
      everyMs: 3_600_000,
      log: (entry) => logs.push(entry),
      signer: async () => {
        if (failing) throw new Error('no bundle here');
        return { key: f.key, deployment: 'jobs.example' };
      },
    });
    const queued = () =>
      f.db
        .selectFrom('compute.jobs')
        .select(['run_at'])
        .where('kind', '=', AUDIT_CHECKPOINT_JOB)
        .where('state', '=', 'queued')
        .execute();
    await writeEntries(f.db, 'acme', 3);
    let sealed = false;
    for (let i = 0; i < 200 && !sealed; i++) {
      await job({ db: f.db, payload: {}, now: () => new Date() });
      const last = await f.db
        .selectFrom('compute.audit_checkpoints')
        .select(['tree_size', 'note'])
        .orderBy('tree_size', 'desc')
        .executeTakeFirst();
      if (Number(last?.tree_size ?? 0) === 3) {
        expect(last!.note.startsWith('jobs.example/audit/acme\n3\n')).toBe(true);
        sealed = true;
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(sealed).toBe(true);
    const next = await queued();
    expect(next).toHaveLength(1);
    expect(next[0]!.run_at.getTime()).toBeGreaterThan(Date.now() + 3_500_000);
    await queueCheckpoint(f.db, new Date());
    expect(await queued()).toHaveLength(1);

    failing = true;
    await job({ db: f.db, payload: {}, now: () => new Date() });
    await job({ db: f.db, payload: {}, now: () => new Date() });
    expect(logs.filter((entry) => entry.level === 'warn').map((entry) => entry.message)).toEqual([
      'audit checkpoint did not run',
    ]);
    expect(await queued()).toHaveLength(1);
    expect((await verifyAuditLog(f.db, { tenantId: 'acme', pin: f.pin })).ok).toBe(true);
  });

  it('doctor warns when entries wait longer than two intervals for a checkpoint', async () => {
    const { auditSealFinding } = await import('../src/audit/doctor.js');
    const hour = 3_600_000;
    await writeEntries(f.db, 'late', 2);
    const fresh = await auditSealFinding(f.db, new Date(), hour);
    expect(fresh).toMatchObject({ check: 'audit.sealed', severity: 'ok' });
    expect(fresh.message).toMatch(/checkpoint\(s\) signed; 2 entries for the next$/);
    const later = await auditSealFinding(f.db, new Date(Date.now() + 3 * hour), hour);
    expect(later).toMatchObject({ check: 'audit.sealed', severity: 'warning' });
    expect(later.message).toMatch(/^2 audit entries wait for a checkpoint/);
    await sealUntil(f, 'late', 2);
    expect(await auditSealFinding(f.db, new Date(Date.now() + 3 * hour), hour)).toMatchObject({
      severity: 'ok',
    });
  });
});
