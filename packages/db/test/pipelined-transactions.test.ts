import { createServer, connect, type AddressInfo, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CompiledQuery, sql, type Kysely } from 'kysely';
import { openDatabase, sendAnsweredLater, sentWithCommit, type Database } from '../src/database.js';
import {
  createTestDatabase,
  isPostgresReachable,
  testDatabaseKinds,
  type TestDatabase,
} from '../src/testing.js';

// On PostgreSQL a transaction's `begin` and its statement marked sentWithCommit travel with the
// statements after them; on PGlite they run where they stand. Either way a transaction must mean
// the same: these cases hold on both.
describe.each(await testDatabaseKinds())('transactions with pipelined begin and commit on %s', (kind) => {
  let database: TestDatabase;
  let db: Kysely<any>;
  const held = (label: string, id: number) =>
    CompiledQuery.raw(sentWithCommit('insert into public.entry (id, label) values ($1, $2)'), [id, label]);
  const labels = async () =>
    (await sql<{ label: string }>`select label from public.entry order by id`.execute(db)).rows.map(
      (r) => r.label,
    );

  beforeAll(async () => {
    database = await createTestDatabase(kind);
    db = database.db;
    await sql`create table public.entry (id int primary key, label text not null)`.execute(db);
  });
  afterAll(async () => {
    await database?.close();
  });

  it('commits the statements before it and the one sent with it', async () => {
    await sql`delete from public.entry`.execute(db);
    const answer = await db.transaction().execute(async (trx) => {
      const first = await sql<{
        id: number;
      }>`insert into public.entry values (${1}, 'first') returning id`.execute(trx);
      await trx.executeQuery(held('kept', 2));
      return first.rows[0]!.id;
    });
    expect(answer).toBe(1);
    expect(await labels()).toEqual(['first', 'kept']);
  });

  it('a statement sent with the commit that fails fails the transaction, and nothing stays', async () => {
    await sql`delete from public.entry`.execute(db);
    await sql`insert into public.entry values (1, 'before')`.execute(db);
    const failing = db.transaction().execute(async (trx) => {
      await sql`insert into public.entry values (${2}, 'lost')`.execute(trx);
      await trx.executeQuery(held('duplicate', 1));
    });
    await expect(failing).rejects.toMatchObject({ code: '23505' });
    expect(await labels()).toEqual(['before']);
  });

  it('a statement after a held one sees what the held one wrote', async () => {
    await sql`delete from public.entry`.execute(db);
    const seen = await db.transaction().execute(async (trx) => {
      await trx.executeQuery(held('early', 1));
      return (
        await sql<{ n: number }>`select count(*)::int as n from public.entry where id = ${1}`.execute(trx)
      ).rows[0]!.n;
    });
    expect(seen).toBe(1);
    expect(await labels()).toEqual(['early']);
  });

  it('a rollback drops the held statement', async () => {
    await sql`delete from public.entry`.execute(db);
    const failing = db.transaction().execute(async (trx) => {
      await sql`insert into public.entry values (${1}, 'gone')`.execute(trx);
      await trx.executeQuery(held('never', 2));
      throw new Error('changed my mind');
    });
    await expect(failing).rejects.toThrow('changed my mind');
    expect(await labels()).toEqual([]);
  });

  it('a first statement that fails after the pipelined begin rolls back and leaves the connection usable', async () => {
    await sql`delete from public.entry`.execute(db);
    for (let round = 0; round < 3; round++) {
      const failing = db.transaction().execute(async (trx) => {
        await sql`insert into public.entry values (${1}, ${null})`.execute(trx);
      });
      await expect(failing).rejects.toMatchObject({ code: '23502' });
    }
    await db.transaction().execute(async (trx) => {
      await sql`insert into public.entry values (${1}, 'after')`.execute(trx);
    });
    // A transaction that sends nothing commits (on PostgreSQL without a round trip).
    await db.transaction().execute(async () => {});
    expect(await labels()).toEqual(['after']);
  });

  it('outside a transaction a statement marked sent with commit runs at once', async () => {
    await sql`delete from public.entry`.execute(db);
    await db.executeQuery(held('alone', 1));
    expect(await labels()).toEqual(['alone']);
  });

  it('a statement answered later gives its rows, and the statements after it see what it saw', async () => {
    await sql`delete from public.entry`.execute(db);
    const [counted, inserted] = await db.transaction().execute(async (trx) => {
      await trx.executeQuery(held('before', 1));
      const later = await sendAnsweredLater<{ n: number }>(
        trx,
        'select count(*)::int as n from public.entry where id = $1',
        [1],
      );
      const after = await sql<{
        id: number;
      }>`insert into public.entry values (${2}, 'after') returning id`.execute(trx);
      return [await later.answer(), after.rows[0]!.id];
    });
    expect(counted).toEqual([{ n: 1 }]);
    expect(inserted).toBe(2);
    expect(await labels()).toEqual(['before', 'after']);
  });

  it('a statement answered later with nothing after it is sent when its answer is asked for', async () => {
    await sql`delete from public.entry`.execute(db);
    const answer = await db.transaction().execute(async (trx) => {
      const later = await sendAnsweredLater<{ n: number }>(trx, 'select $1::int as n', [42]);
      return later.answer();
    });
    expect(answer).toEqual([{ n: 42 }]);
    // Outside a transaction it runs at once.
    const alone = await sendAnsweredLater<{ n: number }>(db, 'select $1::int as n', [7]);
    expect(await alone.answer()).toEqual([{ n: 7 }]);
  });

  it('a statement answered later that fails fails the transaction, and its answer', async () => {
    await sql`delete from public.entry`.execute(db);
    let later: { answer(): Promise<unknown> } | undefined;
    const failing = db.transaction().execute(async (trx) => {
      // PGlite runs it at once, so it fails here; PostgreSQL fails the statement it went out with.
      later = await sendAnsweredLater(trx, 'select 1 / $1::int as n', [0]);
      await sql`insert into public.entry values (${1}, 'lost')`.execute(trx);
    });
    await expect(failing).rejects.toMatchObject({ code: '22012' });
    if (later) await expect(later.answer()).rejects.toMatchObject({ code: '22012' });
    expect(await labels()).toEqual([]);
  });

  it('a statement answered later in a transaction that rolls back does not leave its answer waiting', async () => {
    await sql`delete from public.entry`.execute(db);
    let later: { answer(): Promise<unknown> } | undefined;
    const failing = db.transaction().execute(async (trx) => {
      later = await sendAnsweredLater(trx, 'select $1::int as n', [1]);
      throw new Error('changed my mind');
    });
    await expect(failing).rejects.toThrow('changed my mind');
    const outcome = await Promise.race([
      later!.answer().then(
        () => 'answered',
        () => 'refused',
      ),
      new Promise((resolve) => setTimeout(() => resolve('waiting'), 2000)),
    ]);
    expect(outcome).not.toBe('waiting');
  });

  it('concurrent transactions on the pool keep their statements apart', async () => {
    await sql`delete from public.entry`.execute(db);
    await sql`insert into public.entry values (1000, 'taken')`.execute(db);
    await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        db
          .transaction()
          .execute(async (trx) => {
            await sql`insert into public.entry values (${i * 2}, ${`a${i}`})`.execute(trx);
            await trx.executeQuery(held(`b${i}`, i % 10 === 0 ? 1000 : i * 2 + 1));
          })
          .catch((error: { code?: string }) => error.code),
      ),
    );
    const rows = await labels();
    // Every tenth transaction's held statement collides with the row taken before: it fails whole.
    for (let i = 0; i < 40; i++) {
      if (i % 10 === 0) {
        expect(rows).not.toContain(`a${i}`);
      } else {
        expect(rows).toContain(`a${i}`);
        expect(rows).toContain(`b${i}`);
      }
    }
  });
});

// What the pipelining is for: fewer round trips. A relay between the driver and PostgreSQL counts
// the writes that reach the server; a write is one round trip's worth of messages.
describe.runIf(await isPostgresReachable())('pipelined transactions on the wire', () => {
  let database: TestDatabase;
  let relayed: Database;
  let relay: Server;
  let writes = 0;
  beforeAll(async () => {
    database = await createTestDatabase('postgres');
    await sql`create table public.entry (id int primary key, label text not null)`.execute(database.db);
    const target = new URL(database.url!);
    relay = createServer((client) => {
      const server = connect(Number(target.port || 5432), target.hostname);
      client.on('data', (chunk) => {
        writes++;
        server.write(chunk);
      });
      server.on('data', (chunk) => client.write(chunk));
      client.on('close', () => server.destroy());
      server.on('close', () => client.destroy());
      client.on('error', () => server.destroy());
      server.on('error', () => client.destroy());
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    const url = new URL(database.url!);
    url.hostname = '127.0.0.1';
    url.port = String((relay.address() as AddressInfo).port);
    relayed = await openDatabase({ url: url.toString(), poolSize: 1 });
  });
  afterAll(async () => {
    await relayed?.close();
    relay?.close();
    await database?.close();
  });

  it('a transaction of one statement and one sent with the commit reaches the server in two writes', async () => {
    // Warm the connection and its prepared statements, then count one transaction.
    const run = (id: number) =>
      relayed.db.transaction().execute(async (trx) => {
        await sql`insert into public.entry values (${id}, 'first')`.execute(trx);
        await trx.executeQuery(
          CompiledQuery.raw(sentWithCommit('insert into public.entry (id, label) values ($1, $2)'), [
            id + 1,
            'second',
          ]),
        );
      });
    await run(1);
    writes = 0;
    await run(3);
    // Unpipelined it would be four: begin, the insert, the held insert, commit.
    expect(writes).toBe(2);
    const rows = await sql<{ id: number }>`select id from public.entry order by id`.execute(database.db);
    expect(rows.rows.map((r) => r.id)).toEqual([1, 2, 3, 4]);
  });

  it('statements held and answered later go out with the next statement in one write', async () => {
    const run = (id: number) =>
      relayed.db.transaction().execute(async (trx) => {
        await trx.executeQuery(
          CompiledQuery.raw(sentWithCommit('select pg_advisory_xact_lock($1::bigint)'), [id]),
        );
        const later = await sendAnsweredLater<{ n: number }>(
          trx,
          'select count(*)::int as n from public.entry where id >= $1',
          [id],
        );
        await trx.executeQuery(CompiledQuery.raw(sentWithCommit('savepoint mark')));
        await sql`insert into public.entry values (${id}, 'third')`.execute(trx);
        return later.answer();
      });
    await run(10);
    writes = 0;
    const answer = await run(20);
    // One write for begin, the lock, the read, the savepoint and the insert; one for the commit.
    expect(writes).toBe(2);
    expect(answer).toEqual([{ n: 0 }]);
  });
});
