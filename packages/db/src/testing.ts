/**
 * Databases for tests: a fresh PostgreSQL database per suite when the server is reachable
 * (BETTER_COMPUTE_TEST_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres), and a
 * fresh PGlite otherwise or on request. PGlite instances start from a saved empty data directory,
 * which is several times faster than initialising a new one.
 */
import { randomBytes } from 'node:crypto';
import { type Database, type DatabaseKind, openDatabase } from './database.js';

export const TEST_DATABASE_URL =
  process.env.BETTER_COMPUTE_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

let postgresReachable: Promise<boolean> | undefined;
let pgliteTemplate: Promise<Blob> | undefined;

/** Whether the test PostgreSQL server answers. */
export function isPostgresReachable(): Promise<boolean> {
  postgresReachable ??= (async () => {
    try {
      const admin = await openDatabase({ url: TEST_DATABASE_URL, poolSize: 1 });
      try {
        await admin.db.selectNoFrom((eb) => eb.lit(1).as('one')).execute();
        return true;
      } finally {
        await admin.close();
      }
    } catch {
      return false;
    }
  })();
  return postgresReachable;
}

/** The kinds of database the suites run on here: both when PostgreSQL answers, else PGlite. */
export async function testDatabaseKinds(): Promise<DatabaseKind[]> {
  return (await isPostgresReachable()) ? ['postgres', 'pglite'] : ['pglite'];
}

export interface TestDatabase extends Database {
  /** The URL of a PostgreSQL test database (for other processes); undefined on PGlite. */
  readonly url: string | undefined;
}

/**
 * An initialised, empty PGlite cluster as a tarball. Initialising takes seconds, restoring one about
 * a second, so the first test process writes it to node_modules/.cache and the others reuse it.
 */
async function loadPGliteTemplate(): Promise<Blob> {
  const { PGlite } = await import('@electric-sql/pglite');
  const { readFile, writeFile, mkdir, rename } = await import('node:fs/promises');
  const { createRequire } = await import('node:module');
  const { dirname, join } = await import('node:path');
  const require = createRequire(import.meta.url);
  const pgliteDir = dirname(require.resolve('@electric-sql/pglite'));
  const { version } = JSON.parse(await readFile(join(pgliteDir, '..', 'package.json'), 'utf8')) as {
    version: string;
  };
  const cacheDir = join(
    pgliteDir.slice(0, pgliteDir.lastIndexOf('node_modules') + 'node_modules'.length),
    '.cache',
    'better-compute',
  );
  const cacheFile = join(cacheDir, `pglite-${version}-template.tar`);
  try {
    return new Blob([await readFile(cacheFile)]);
  } catch {
    const client = await PGlite.create();
    const blob = await client.dumpDataDir('none');
    await client.close();
    await mkdir(cacheDir, { recursive: true });
    const temporary = `${cacheFile}.${process.pid}.tmp`;
    await writeFile(temporary, Buffer.from(await blob.arrayBuffer()));
    await rename(temporary, cacheFile);
    return blob;
  }
}

/** A new, empty database of the given kind; `close()` drops it. */
export async function createTestDatabase(
  kind: DatabaseKind = 'postgres',
  poolSize = 10,
  /** Called with every statement sent (see DatabaseOptions.onQuery). */
  onQuery?: (sql: string) => void,
): Promise<TestDatabase> {
  if (kind === 'pglite') {
    pgliteTemplate ??= loadPGliteTemplate();
    const database = await openDatabase({
      pglite: { loadDataDir: await pgliteTemplate },
      ...(onQuery ? { onQuery } : {}),
    });
    return { ...database, url: undefined };
  }
  const name = `bc_test_${randomBytes(6).toString('hex')}`;
  const admin = await openDatabase({ url: TEST_DATABASE_URL, poolSize: 1 });
  try {
    const { sql } = await import('kysely');
    await sql.raw(`create database ${name}`).execute(admin.db);
  } finally {
    await admin.close();
  }
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  const database = await openDatabase({ url: url.toString(), poolSize, ...(onQuery ? { onQuery } : {}) });
  return {
    ...database,
    url: url.toString(),
    async close() {
      await database.close();
      const cleanup = await openDatabase({ url: TEST_DATABASE_URL, poolSize: 1 });
      try {
        const { sql } = await import('kysely');
        await sql.raw(`drop database if exists ${name} with (force)`).execute(cleanup.db);
      } finally {
        await cleanup.close();
      }
    },
  };
}
