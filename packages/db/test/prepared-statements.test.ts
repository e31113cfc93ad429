import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { createTestDatabase, isPostgresReachable, type TestDatabase } from '../src/testing.js';

// Prepared statements are a feature of the `pg` path only; PGlite runs in process.
describe.runIf(await isPostgresReachable())('prepared statements on PostgreSQL', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase('postgres');
    await sql`create table public.item (id int primary key, label text)`.execute(database.db);
    await sql`insert into public.item values (1, 'one'), (2, 'two')`.execute(database.db);
  });
  afterAll(async () => {
    await database?.close();
  });

  it('a statement with parameters is prepared once per connection and answers as before', async () => {
    await database.db.connection().execute(async (db) => {
      for (const id of [1, 2, 1]) {
        const row = await db
          .selectFrom('public.item')
          .select('label')
          .where('id', '=', id)
          .executeTakeFirst();
        expect(row?.label).toBe(id === 1 ? 'one' : 'two');
      }
      const prepared = await sql<{ name: string; statement: string }>`
        select name, statement from pg_prepared_statements where statement like '%from "public"."item"%'`.execute(
        db,
      );
      expect(prepared.rows).toHaveLength(1);
      expect(prepared.rows[0]!.name).toMatch(/^bc_/);
    });
  });

  it('a statement whose result changed shape fails once, then is prepared afresh', async () => {
    await database.db.connection().execute(async (db) => {
      const read = () => sql<{ id: number }>`select * from public.item where id = ${1}`.execute(db);
      expect((await read()).rows[0]).toEqual({ id: 1, label: 'one' });
      await sql`alter table public.item add column weight int`.execute(db);
      await expect(read()).rejects.toMatchObject({ code: '0A000' });
      expect((await read()).rows[0]).toEqual({ id: 1, label: 'one', weight: null });
    });
  });
});
