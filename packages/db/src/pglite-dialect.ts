/**
 * A thin Kysely dialect over PGlite. PGlite is one session, so the driver hands out one connection
 * at a time: a transaction holds it until it ends, and everything else waits its turn. Code inside a
 * transaction must therefore use the transaction, never the outer database, or it waits forever.
 */
import type { PGlite } from '@electric-sql/pglite';
import {
  CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';

class PGliteConnection implements DatabaseConnection {
  readonly #client: PGlite;
  constructor(client: PGlite) {
    this.#client = client;
  }

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    // A raw query without parameters may hold several statements (a migration): only the simple
    // protocol runs those, and it answers with the last statement's rows.
    if (compiled.parameters.length === 0 && compiled.query.kind === 'RawNode') {
      const results = await this.#client.exec(compiled.sql);
      const last = results.at(-1);
      return { rows: (last?.rows ?? []) as R[] };
    }
    const result = await this.#client.query<R>(compiled.sql, compiled.parameters as unknown[]);
    const command = compiled.query.kind;
    const changes =
      command === 'InsertQueryNode' ||
      command === 'UpdateQueryNode' ||
      command === 'DeleteQueryNode' ||
      command === 'MergeQueryNode';
    return changes && result.affectedRows !== undefined
      ? { rows: result.rows, numAffectedRows: BigInt(result.affectedRows) }
      : { rows: result.rows };
  }

  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('PGlite does not stream query results');
  }
}

class PGliteDriver implements Driver {
  readonly #client: PGlite;
  readonly #connection: PGliteConnection;
  #queue: Promise<void> = Promise.resolve();
  #release: (() => void) | undefined;

  constructor(client: PGlite) {
    this.#client = client;
    this.#connection = new PGliteConnection(client);
  }

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    const previous = this.#queue;
    let release!: () => void;
    this.#queue = new Promise<void>((resolve) => (release = resolve));
    await previous;
    this.#release = release;
    return this.#connection;
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const isolation = settings.isolationLevel ? ` isolation level ${settings.isolationLevel}` : '';
    await connection.executeQuery(CompiledQuery.raw(`begin${isolation}`));
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('commit'));
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('rollback'));
  }

  async releaseConnection(): Promise<void> {
    const release = this.#release;
    this.#release = undefined;
    release?.();
  }

  async destroy(): Promise<void> {
    await this.#queue;
    if (!this.#client.closed) await this.#client.close();
  }
}

/** A Kysely dialect for a PGlite instance the caller created. */
export class PGliteDialect implements Dialect {
  readonly #client: PGlite;
  constructor(client: PGlite) {
    this.#client = client;
  }
  createAdapter() {
    return new PostgresAdapter();
  }
  createDriver(): Driver {
    return new PGliteDriver(this.#client);
  }
  createIntrospector(db: Kysely<unknown>) {
    return new PostgresIntrospector(db);
  }
  createQueryCompiler() {
    return new PostgresQueryCompiler();
  }
}
