/**
 * A connection reset while a query runs fails that query and nothing else: the process goes on
 * (the pool listens for a client's errors only while it is idle, so a checked-out client's socket
 * error had no listener and ended the process), and the next query gets a new connection.
 */
import { createServer, type Socket, connect as dial } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/index.js';
import { createTestDatabase, isPostgresReachable, type TestDatabase } from '../src/testing.js';

describe.runIf(await isPostgresReachable())('a connection reset mid-query', () => {
  let target: TestDatabase;
  const links: { client: Socket; server: Socket }[] = [];
  const proxy = createServer((client) => {
    const { hostname, port } = new URL(target.url!);
    const server = dial(Number(port || 5432), hostname);
    client.pipe(server).pipe(client);
    client.on('error', () => {});
    server.on('error', () => {});
    links.push({ client, server });
  });

  beforeAll(async () => {
    target = await createTestDatabase('postgres');
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    for (const link of links) link.client.destroy();
    await new Promise<void>((resolve) => proxy.close(() => resolve()));
    await target?.close();
  });

  it('fails the query, does not end the process, and the next query runs on a new connection', async () => {
    const url = new URL(target.url!);
    url.host = `127.0.0.1:${(proxy.address() as { port: number }).port}`;
    const database = await openDatabase({ url: url.toString(), poolSize: 1 });
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => void uncaught.push(error);
    process.on('uncaughtException', onUncaught);
    try {
      const running = sql`select pg_sleep(5)`.execute(database.db).then(
        () => null,
        (error: unknown) => error,
      );
      while (links.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
      await new Promise((resolve) => setTimeout(resolve, 300));
      // A reset, as a peer or a middlebox that drops the connection sends.
      links[0]!.client.resetAndDestroy();
      expect(await running).toBeInstanceOf(Error);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(uncaught).toEqual([]);
      const again = await sql<{ one: number }>`select 1 as one`.execute(database.db);
      expect(again.rows).toEqual([{ one: 1 }]);
    } finally {
      process.off('uncaughtException', onUncaught);
      await database.close();
    }
  });
});
