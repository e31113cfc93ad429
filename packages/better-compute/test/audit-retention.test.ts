/**
 * Outbox retention never reaches the audit log: the maintenance pass of a controllers replica
 * deletes events past `events.retention`, and every audit entry, sealed or not, stays; the log
 * still verifies afterwards.
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
        const left = await f.db.selectFrom('compute.events').select('data').execute();
        if (left.length === 1) break;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    } finally {
      await loop.stop();
    }
    const names = (await f.db.selectFrom('compute.events').select('data').execute()).map(
      (row) => row.data.name,
    );
    expect(names).toEqual(['new']);
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
