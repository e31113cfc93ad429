import { describe, expect, it } from 'vitest';
import { createTestDatabase, testDatabaseKinds } from '@better-compute/db/testing';
import { migrate } from '@better-compute/db';
import { sql, type Kysely } from 'kysely';
import { foundationMigrations } from '../src/db/migrations.js';
import type { ComputeTables } from '../src/db/tables.js';
import { writeEvents } from '../src/db/unit-of-work.js';
import { listEvents } from '../src/modules/events/service.js';

const kinds = await testDatabaseKinds();
const meta = { tenantId: 'acme', actor: null, requestId: 'req_test' };
const draft = (name: string) => ({
  type: 'test.written',
  subject: { type: 'test', id: null },
  data: { name },
});

async function readAll(
  db: Kysely<ComputeTables>,
  cursor: string | undefined,
): Promise<{ names: string[]; cursor: string | undefined }> {
  const names: string[] = [];
  for (;;) {
    const page = await listEvents(db, { tenantId: 'acme', limit: 50, cursor });
    names.push(...page.items.map((e) => e.data.name as string));
    if (page.items.length) cursor = page.items.at(-1)!.position;
    if (!page.nextCursor) return { names, cursor };
  }
}

describe.runIf(kinds.includes('postgres'))('the outbox under concurrent writers (postgres)', () => {
  it('a reader does not pass a transaction that commits late with a lower position', async () => {
    const database = await createTestDatabase('postgres');
    try {
      await migrate(database.db, [foundationMigrations]);
      const db = database.db as Kysely<ComputeTables>;
      let releaseEarly!: () => void;
      const held = new Promise<void>((resolve) => (releaseEarly = resolve));
      let started!: () => void;
      const earlyStarted = new Promise<void>((resolve) => (started = resolve));
      // The early transaction takes its id first, then stays open while a later one commits.
      const early = db.transaction().execute(async (trx) => {
        await writeEvents(trx, [draft('early')], meta);
        // On PostgreSQL the record waits to go out with the next statement or the commit: send one.
        await sql`select 1`.execute(trx);
        started();
        await held;
      });
      await earlyStarted;
      await db.transaction().execute((trx) => writeEvents(trx, [draft('late')], meta));
      const first = await readAll(db, undefined);
      expect(first.names).toEqual([]);
      releaseEarly();
      await early;
      // Other suites' transactions on this server may hold visibility back a moment longer.
      let second = await readAll(db, first.cursor);
      for (let i = 0; i < 200 && second.names.length < 2; i++) {
        await new Promise((r) => setTimeout(r, 25));
        const more = await readAll(db, second.cursor ?? first.cursor);
        second = { names: [...second.names, ...more.names], cursor: more.cursor ?? second.cursor };
      }
      expect(second.names).toEqual(['early', 'late']);
    } finally {
      await database.close();
    }
  });

  it('a reader polling during 8 concurrent writers sees every event exactly once, in order', async () => {
    const database = await createTestDatabase('postgres', 20);
    try {
      await migrate(database.db, [foundationMigrations]);
      const db = database.db as Kysely<ComputeTables>;
      const written: string[] = [];
      const writers = Array.from({ length: 8 }, (_, w) =>
        (async () => {
          for (let i = 0; i < 25; i++) {
            const names = [`w${w}-${i}-a`, `w${w}-${i}-b`];
            await db.transaction().execute(async (trx) => {
              await writeEvents(trx, names.map(draft), meta);
              await new Promise((r) => setTimeout(r, Math.random() * 4));
            });
            written.push(...names);
          }
        })(),
      );
      const seen: string[] = [];
      let cursor: string | undefined;
      let writing = true;
      const all = Promise.all(writers).then(() => (writing = false));
      while (writing) {
        const page = await readAll(db, cursor);
        seen.push(...page.names);
        cursor = page.cursor;
      }
      await all;
      for (let i = 0; i < 200 && seen.length < written.length; i++) {
        const rest = await readAll(db, cursor);
        seen.push(...rest.names);
        cursor = rest.cursor;
        if (seen.length < written.length) await new Promise((r) => setTimeout(r, 25));
      }
      expect(seen).toHaveLength(written.length);
      expect(new Set(seen).size).toBe(seen.length);
      expect(new Set(seen)).toEqual(new Set(written));
      // Within one transaction the order is the order of emission.
      for (const name of seen.filter((n) => n.endsWith('-a'))) {
        expect(seen.indexOf(name.replace(/-a$/, '-b'))).toBe(seen.indexOf(name) + 1);
      }
    } finally {
      await database.close();
    }
  });

  it('a long write in another database on the same server holds nothing back here', async () => {
    const database = await createTestDatabase('postgres');
    const elsewhere = await createTestDatabase('postgres');
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const begun = new Promise<void>((resolve) => (started = resolve));
    try {
      await migrate(database.db, [foundationMigrations]);
      const db = database.db as Kysely<ComputeTables>;
      // A transaction of the other database takes an id first and stays open: below every id this
      // database hands out next, so PostgreSQL's xmin stays behind it.
      const other = elsewhere.db.transaction().execute(async (trx) => {
        await sql`create table held_open (id int)`.execute(trx);
        await sql`select 1`.execute(trx);
        started();
        await held;
      });
      await begun;
      await db.transaction().execute((trx) => writeEvents(trx, [draft('here')], meta));
      const xmin = await sql<{ behind: boolean }>`
        select pg_snapshot_xmin(pg_current_snapshot()) <= (select max(tx_id) from compute.events) as behind`.execute(
        db,
      );
      expect(xmin.rows[0]!.behind).toBe(true);
      expect((await readAll(db, undefined)).names).toEqual(['here']);
      release();
      await other;
    } finally {
      release();
      await database.close();
      await elsewhere.close();
    }
  });
});

describe.each(kinds)('a call that tells thousands of events (%s)', (kind) => {
  it('writes them all, in order, past the 65,535 parameters one statement takes', async () => {
    const database = await createTestDatabase(kind);
    try {
      await migrate(database.db, [foundationMigrations]);
      const db = database.db as Kysely<ComputeTables>;
      // 12,001 events: nine parameters each would be 108,009 in one statement (a fleet apply's size).
      const names = Array.from({ length: 12_001 }, (_, i) => `e${i}`);
      await db.transaction().execute((trx) => writeEvents(trx, names.map(draft), meta));
      const { rows } = await sql<{ name: string; tx_index: number }>`
        select data->>'name' as name, tx_index from compute.events order by tx_id, tx_index`.execute(db);
      expect(rows.map((r) => r.name)).toEqual(names);
      expect(rows.map((r) => Number(r.tx_index))).toEqual(names.map((_, i) => i));
    } finally {
      await database.close();
    }
  });
});
