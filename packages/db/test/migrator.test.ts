import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { migrate, migrationStatus, type ModuleMigrations } from '../src/index.js';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '../src/testing.js';

const kinds = await testDatabaseKinds();

const first: ModuleMigrations = {
  module: 'widgets',
  migrations: [
    { name: '0001_init', sql: 'create schema widgets; create table widgets.widget (id text primary key);' },
    { name: '0002_label', sql: 'alter table widgets.widget add column label text;' },
  ],
};

describe.each(kinds)('migrations on %s', (kind) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase(kind);
  });
  afterAll(async () => {
    await database?.close();
  });

  it('a fresh database gets every migration, in order, and reports them', async () => {
    const result = await migrate(database.db, [first]);
    expect(result.applied).toEqual([
      { module: 'widgets', name: '0001_init' },
      { module: 'widgets', name: '0002_label' },
    ]);
    await sql`insert into widgets.widget (id, label) values ('w1', 'one')`.execute(database.db);
  });

  it('running it again applies nothing', async () => {
    const result = await migrate(database.db, [first]);
    expect(result).toEqual({ applied: [], alreadyApplied: 2 });
  });

  it('an applied migration that was edited is refused, and nothing new is applied', async () => {
    const edited: ModuleMigrations = {
      module: 'widgets',
      migrations: [
        {
          name: '0001_init',
          sql: 'create schema widgets; create table widgets.widget (id int primary key);',
        },
        first.migrations[1]!,
        { name: '0003_more', sql: 'alter table widgets.widget add column more text;' },
      ],
    };
    await expect(migrate(database.db, [edited])).rejects.toMatchObject({
      code: 'INVALID_STATE',
      message: 'migration widgets/0001_init was edited after it was applied',
    });
    const status = await migrationStatus(database.db, [edited]);
    expect(status.map((s) => s.state)).toEqual(['changed', 'applied', 'pending']);
  });
});

describe.runIf(kinds.includes('postgres'))('two runners at once on postgres', () => {
  it('apply each migration exactly once', async () => {
    const database = await createTestDatabase('postgres');
    try {
      const results = await Promise.all([migrate(database.db, [first]), migrate(database.db, [first])]);
      const applied = results.map((r) => r.applied.length).sort();
      expect(applied).toEqual([0, 2]);
    } finally {
      await database.close();
    }
  });
});
