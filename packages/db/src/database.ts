/**
 * One way to open the store: PostgreSQL through `pg`, or PGlite embedded (in memory or in a
 * directory). Both answer the same types: int8 as a JavaScript number, numeric as a string.
 */
import { createHash } from 'node:crypto';
import { CompiledQuery, Kysely, type KyselyConfig, PostgresDialect, sql } from 'kysely';
import { ComputeError } from '@better-compute/core';
import { PGliteDialect } from './pglite-dialect.js';

export type DatabaseKind = 'postgres' | 'pglite';

export interface Database {
  // Kysely's own generic for "any schema": each module narrows it with its table types.
  readonly db: Kysely<any>;
  readonly kind: DatabaseKind;
  /** Where it lives, with any password removed: safe to print. */
  readonly description: string;
  /**
   * The PostgreSQL connection URL, for a component that needs a connection of its own (IAM's
   * LISTEN). It may hold a password: never print or log it; print `description`.
   */
  readonly url?: string | undefined;
  /** The connection pool's use now (PostgreSQL only): for the metrics a replica exposes. */
  poolUse?(): PoolUse;
  close(): Promise<void>;
}

export interface PoolUse {
  /** Connections open, idle and in use together. */
  total: number;
  idle: number;
  /** Callers waiting for a connection. */
  waiting: number;
  max: number;
}

export type DatabaseOptions = (
  { url: string; poolSize?: number } | { pglite: { dataDir?: string; loadDataDir?: Blob } }
) & {
  /** Called with every statement sent, `begin` and `commit` included: for counting, never for secrets. */
  onQuery?: (sql: string) => void;
};

/** The PGlite engine behind a database's Kysely object, for LISTEN (see listen.ts). */
export const pgliteClients = new WeakMap<object, import('@electric-sql/pglite').PGlite>();

/**
 * The connections a pool opens unless told otherwise. Fewer than ten looked right on paper (two
 * cores), but measured on a quiet host the server with four connections made half the
 * reserve-and-release pairs a second of the same server with ten, and cost PostgreSQL twice the CPU
 * per pair (docs/decisions/reserve-benchmark.md).
 */
const DEFAULT_POOL_SIZE = 10;

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
  const log: KyselyConfig['log'] = options.onQuery
    ? (event) => {
        if (event.level === 'query') options.onQuery!(event.query.sql);
      }
    : undefined;
  if ('pglite' in options) return openPGlite(options.pglite, log);
  const { url } = options;
  if (url.startsWith('pglite:')) {
    const target = url.slice('pglite:'.length);
    return openPGlite(target === 'memory' || target === '' ? {} : { dataDir: target }, log);
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
      return pg.default.types.getTypeParser(oid, format) as (value: string) => unknown;
    },
  };
  // Pipeline mode lets pipelineTransactions put a transaction's `begin` and its statement sent at
  // commit on the wire with the statement that follows them; every other statement is still
  // awaited before the next is sent.
  const pool = new pg.default.Pool({
    connectionString: url,
    max: options.poolSize ?? DEFAULT_POOL_SIZE,
    types,
    pipeline: true,
  } as ConstructorParameters<typeof pg.default.Pool>[0]);
  // An idle client that loses its server must not crash the process; the next query reports it.
  pool.on('error', () => {});
  pool.on('connect', (client) => {
    // Nor may one that is checked out: the pool listens for its errors only while it is idle, and
    // a client emits its socket's error (a backend terminated mid-query) after failing its
    // queries with it, so with no listener that error would end the process. The queries already
    // carry it; a client that is no longer queryable is dropped when it is released.
    client.on('error', () => {});
    prepareStatements(client as unknown as PgClient);
    pipelineTransactions(client as unknown as PgClient);
  });
  const description = redactDatabaseUrl(url);
  // A database that cannot be reached is UNAVAILABLE wherever the first query meets it (migrate,
  // a request), said without the URL's password, instead of the driver's bare error.
  const connect = pool.connect.bind(pool) as () => Promise<unknown>;
  (pool as unknown as { connect: typeof connect }).connect = () =>
    connect().catch((error: unknown) => {
      throw connectionError(error, description);
    });
  const db = new Kysely({ dialect: new PostgresDialect({ pool }), ...(log ? { log } : {}) });
  const max = options.poolSize ?? DEFAULT_POOL_SIZE;
  const poolUse = (): PoolUse => ({
    total: pool.totalCount,
    idle: pool.idleCount,
    waiting: pool.waitingCount,
    max,
  });
  return { db, kind: 'postgres', url, description, poolUse, close: () => db.destroy() };
}

async function openPGlite(
  options: { dataDir?: string; loadDataDir?: Blob },
  log?: KyselyConfig['log'],
): Promise<Database> {
  const { PGlite, types } = await import('@electric-sql/pglite');
  const client = await PGlite.create({
    ...(options.dataDir ? { dataDir: options.dataDir } : {}),
    ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}),
    parsers: { [types.INT8]: (value: string) => Number(value), [types.NUMERIC]: (value: string) => value },
  });
  const db = new Kysely({ dialect: new PGliteDialect(client), ...(log ? { log } : {}) });
  pgliteClients.set(db, client);
  return {
    db,
    kind: 'pglite',
    description: options.dataDir ? `pglite:${options.dataDir}` : 'pglite:memory',
    close: () => db.destroy(),
  };
}

// What connecting may fail with, by the driver's code or PostgreSQL's SQLSTATE, and what to check.
const CONNECTION_FAILURES: Record<string, string> = {
  ECONNREFUSED: 'nothing listens there',
  ENOTFOUND: 'its host name does not resolve',
  EAI_AGAIN: 'its host name does not resolve',
  ETIMEDOUT: 'it does not answer',
  EHOSTUNREACH: 'its host cannot be reached',
  ECONNRESET: 'it closed the connection',
  '28P01': 'it refused the password',
  '28000': 'it refused the user',
  '3D000': 'the database does not exist',
  '57P03': 'it is starting up or shutting down',
  '53300': 'it has no connection left',
};

/** A failure to connect as UNAVAILABLE, naming the database without its password; anything else as it came. */
function connectionError(error: unknown, description: string): unknown {
  const code = (error as { code?: unknown }).code;
  const why = typeof code === 'string' ? CONNECTION_FAILURES[code] : undefined;
  if (!why) return error;
  return new ComputeError('UNAVAILABLE', `the database ${description} cannot be used: ${why} (${code})`, {
    hint: 'Check BETTER_COMPUTE_DATABASE_URL (or the configuration’s database) and that PostgreSQL is running.',
    details: { code },
    cause: error,
    // It names the database: for whoever runs the deployment, not for the API's callers.
    operatorOnly: true,
  });
}

/** Checks the database answers; returns its clock, for skew checks. */
export async function databaseNow(database: Database): Promise<Date> {
  const result = await sql<{ now: Date }>`select now() as now`.execute(database.db);
  return new Date(result.rows[0]!.now);
}

/** The part of a `pg` client that prepareStatements and pipelineTransactions wrap. */
interface PgClient {
  query(config: unknown, values?: unknown, callback?: unknown): unknown;
  connection?: { stream?: { cork?: () => void; uncork?: () => void } };
}

/** Distinct statements a connection keeps prepared; past this, statements are sent unnamed. */
const PREPARED_PER_CONNECTION = 500;

/**
 * Makes every parameterised statement a named, server-side prepared statement, keyed by its text:
 * PostgreSQL parses it once per connection, and after a few runs plans it once too when a generic
 * plan is as good (docs/decisions/prepared-statements.md). Statements without parameters (begin,
 * commit, DDL) go as they are. A statement whose prepared form went stale (a table's columns changed
 * under it: "cached plan must not change result type") fails once and is prepared afresh next time.
 */
function prepareStatements(client: PgClient): void {
  const send = client.query.bind(client);
  const names = new Map<string, string>();
  let renamed = 0;
  client.query = (config: unknown, values?: unknown, callback?: unknown) => {
    if (typeof config !== 'string' || !Array.isArray(values) || values.length === 0)
      return send(config, values, callback);
    let name = names.get(config);
    if (name === undefined) {
      if (names.size >= PREPARED_PER_CONNECTION) return send(config, values, callback);
      name = `bc_${createHash('sha1').update(config).digest('base64url')}`;
      names.set(config, name);
    }
    const result = send({ name, text: config, values }, callback) as Promise<unknown> | undefined;
    if (!result || typeof result.then !== 'function') return result;
    return result.catch((error: { code?: string }) => {
      if (error?.code === '0A000') names.set(config, `${name}_${++renamed}`);
      throw error;
    });
  };
}

/**
 * Marks a statement whose result nobody reads as one to send with the transaction's `commit`
 * (or with the next statement, if one comes first): on PostgreSQL it costs no round trip of its
 * own. Its error, if any, is the commit's. Outside a transaction, and on PGlite, it runs at once.
 */
export function sentWithCommit(text: string): string {
  return SENT_WITH_COMMIT + text;
}

const SENT_WITH_COMMIT = '/* sent with commit */ ';
const ANSWERED_LATER = '/* answered later */ ';
/** The key of the one row a statement answered later returns at once, holding its real answer. */
const LATER = Symbol('answered later');

/** A statement sent by sendAnsweredLater: `answer()` gives its rows. */
export interface AnsweredLater<Row> {
  answer(): Promise<Row[]>;
}

/**
 * Sends a statement whose answer can wait for the transaction's next one: on PostgreSQL, inside a
 * transaction, it is held and written to the socket with the next statement (or the commit), so it
 * costs no round trip of its own; `answer()` resolves with its rows once that write is answered, and
 * sends it alone first if nothing has gone out since. Statements after it run after it, as always,
 * and see what it saw. Its failure is also the next statement's, as for any statement a transaction
 * sends before another. Outside a transaction, and on PGlite, it runs at once. Only a caller that
 * needs the answer before the transaction ends but not before its next statement gains by it: the
 * next statement is written before the answer is read.
 */
export async function sendAnsweredLater<Row>(
  db: Kysely<any>,
  text: string,
  values: readonly unknown[],
): Promise<AnsweredLater<Row>> {
  const result = await db.executeQuery<Row>(CompiledQuery.raw(ANSWERED_LATER + text, [...values]));
  const later = (result.rows[0] as { [LATER]?: HeldAnswer } | undefined)?.[LATER];
  if (!later) return { answer: async () => result.rows };
  return { answer: async () => (await later.answer()).rows as Row[] };
}

interface PgResult {
  command: string | null;
  rowCount: number | null;
  rows: unknown[];
}

/** A held statement's answer, for sendAnsweredLater. */
interface HeldAnswer {
  answer(): Promise<PgResult>;
}

interface Held {
  text: string;
  values: unknown[];
  /** For a statement answered later: where its result goes once sent. */
  settle?: { resolve: (sent: Promise<PgResult>) => void; reject: (error: unknown) => void };
}

/**
 * Saves a transaction round trips (docs/decisions/pipelined-transactions.md): `begin` is not sent
 * alone but written to the wire with the statement that follows it, and statements marked by
 * sentWithCommit or sent by sendAnsweredLater are written with the next statement or the commit.
 * Each still has its own Sync, so a failure stops what follows it in the transaction exactly as it
 * would have unpipelined; the first failure is the one reported. A transaction that sent nothing
 * commits without a round trip.
 */
function pipelineTransactions(client: PgClient): void {
  const original = client.query.bind(client);
  const send = original as (text: string, values?: unknown[]) => Promise<PgResult>;
  let beginPending = false;
  let held: Held[] = [];
  const answered = (command: string, rows: unknown[] = []): Promise<PgResult> =>
    Promise.resolve({ command, rowCount: 0, rows });
  /**
   * Writes what is pending, then `text` if given, as one write to the socket; answers `text`'s
   * result (or nothing's). Statements answered later get their own results.
   */
  const sendWithPending = async (text?: string, values: unknown[] = []): Promise<PgResult> => {
    const stream = client.connection?.stream;
    const sent: Promise<PgResult>[] = [];
    const pending = held;
    held = [];
    stream?.cork?.();
    try {
      if (beginPending) sent.push(send('begin', []));
      for (const statement of pending) {
        const result = send(statement.text, statement.values);
        statement.settle?.resolve(result);
        sent.push(result);
      }
      if (text !== undefined) sent.push(send(text, values));
    } finally {
      beginPending = false;
      stream?.uncork?.();
    }
    // Every promise is settled before answering, so no failure goes unobserved; the first one wins.
    const settled = await Promise.allSettled(sent);
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed) throw failed.reason;
    return text === undefined
      ? { command: null, rowCount: 0, rows: [] }
      : (settled.at(-1) as PromiseFulfilledResult<PgResult>).value;
  };
  const dropHeld = () => {
    for (const statement of held)
      statement.settle?.reject(new Error('the transaction ended before this statement was sent'));
    held = [];
  };
  client.query = (config: unknown, values?: unknown, callback?: unknown) => {
    if (
      typeof config !== 'string' ||
      callback !== undefined ||
      (values !== undefined && !Array.isArray(values))
    )
      return original(config, values, callback);
    const parameters = (values as unknown[] | undefined) ?? [];
    const word = config.length <= 8 ? config.toLowerCase() : '';
    if (word === 'begin') {
      beginPending = true;
      return answered('BEGIN');
    }
    if (word === 'commit' && beginPending && held.length === 0) {
      beginPending = false;
      return answered('COMMIT');
    }
    if (word === 'rollback') {
      dropHeld();
      if (beginPending) {
        beginPending = false;
        return answered('ROLLBACK');
      }
      return send(config, parameters);
    }
    const inOne = beginPending || inTransaction(client);
    if (config.startsWith(SENT_WITH_COMMIT) && inOne) {
      held.push({ text: config, values: parameters });
      return answered('UPDATE');
    }
    if (config.startsWith(ANSWERED_LATER) && inOne) {
      let settle!: Held['settle'];
      const result = new Promise<PgResult>((resolve, reject) => {
        settle = { resolve: (sent) => void sent.then(resolve, reject), reject };
      });
      // Its failure is read by answer(), or reported by the statement it went out with.
      result.catch(() => {});
      const statement: Held = { text: config, values: parameters, settle };
      held.push(statement);
      const later: HeldAnswer = {
        answer: async () => {
          if (held.includes(statement)) await sendWithPending().catch(() => {});
          return result;
        },
      };
      return answered('SELECT', [{ [LATER]: later }]);
    }
    if (beginPending || held.length > 0) return sendWithPending(config, parameters);
    return send(config, parameters);
  };
}

/** Whether the client's last answer left it inside a transaction block. */
function inTransaction(client: PgClient): boolean {
  const status = (client as { getTransactionStatus?: () => string | null }).getTransactionStatus?.();
  return status === 'T' || status === 'E';
}
