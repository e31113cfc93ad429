/**
 * One way to open the store: PostgreSQL through `pg`, or PGlite embedded (in memory or in a
 * directory). Both answer the same types: int8 as a JavaScript number, numeric as a string.
 */
import { Kysely, PostgresDialect, sql } from 'kysely';
import { ComputeError } from '@better-compute/core';
import { PGliteDialect } from './pglite-dialect.js';

export type DatabaseKind = 'postgres' | 'pglite';

export interface Database {
  // Kysely's own generic for "any schema": each module narrows it with its table types.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly db: Kysely<any>;
  readonly kind: DatabaseKind;
  /** Where it lives, with any password removed: safe to print. */
  readonly description: string;
  /**
   * The PostgreSQL connection URL, for a component that needs a connection of its own (IAM's
   * LISTEN). It may hold a password: never print or log it; print `description`.
   */
  readonly url?: string | undefined;
  close(): Promise<void>;
}

export type DatabaseOptions =
  { url: string; poolSize?: number } | { pglite: { dataDir?: string; loadDataDir?: Blob } };

const INT8 = 20;
const NUMERIC = 1700;

/** Removes the password from a connection URL so it can be printed or logged. */
export function redactDatabaseUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return url.replace(/\/\/[^@/]*@/, '//***@');
  }
}

/**
 * Opens a database. A URL is `postgres://…` / `postgresql://…`, or `pglite:memory` /
 * `pglite:/path/to/dir` for the embedded engine.
 */
export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  if ('pglite' in options) return openPGlite(options.pglite);
  const { url } = options;
  if (url.startsWith('pglite:')) {
    const target = url.slice('pglite:'.length);
    return openPGlite(target === 'memory' || target === '' ? {} : { dataDir: target });
  }
  if (!/^postgres(ql)?:\/\//.test(url)) {
    throw new ComputeError(
      'INVALID_CONFIG',
      'the database URL must start with postgres://, postgresql:// or pglite:',
      {
        hint: 'Set BETTER_COMPUTE_DATABASE_URL=postgres://user@host:5432/db, or pglite:memory for an embedded store.',
      },
    );
  }
  const pg = await import('pg');
  const types = {
    getTypeParser(oid: number, format?: 'text' | 'binary') {
      if (oid === INT8) return (value: string) => Number(value);
      if (oid === NUMERIC) return (value: string) => value;
      return pg.default.types.getTypeParser(oid, format);
    },
  };
  const pool = new pg.default.Pool({ connectionString: url, max: options.poolSize ?? 10, types });
  // An idle client that loses its server must not crash the process; the next query reports it.
  pool.on('error', () => {});
  const db = new Kysely({ dialect: new PostgresDialect({ pool }) });
  return { db, kind: 'postgres', url, description: redactDatabaseUrl(url), close: () => db.destroy() };
}

async function openPGlite(options: { dataDir?: string; loadDataDir?: Blob }): Promise<Database> {
  const { PGlite, types } = await import('@electric-sql/pglite');
  const client = await PGlite.create({
    ...(options.dataDir ? { dataDir: options.dataDir } : {}),
    ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}),
    parsers: { [types.INT8]: (value: string) => Number(value), [types.NUMERIC]: (value: string) => value },
  });
  const db = new Kysely({ dialect: new PGliteDialect(client) });
  return {
    db,
    kind: 'pglite',
    description: options.dataDir ? `pglite:${options.dataDir}` : 'pglite:memory',
    close: () => db.destroy(),
  };
}

/** Checks the database answers; returns its clock, for skew checks. */
export async function databaseNow(database: Database): Promise<Date> {
  const result = await sql<{ now: Date }>`select now() as now`.execute(database.db);
  return new Date(result.rows[0]!.now);
}
