/**
 * A database that cannot be used is UNAVAILABLE wherever the first query meets it, naming the
 * database without its password, and marked for operators only (an API answer keeps just the code).
 */
import { createServer } from 'node:net';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../src/index.js';

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('a database that cannot be used', () => {
  it('is UNAVAILABLE at the first query, saying why, without the password, for operators only', async () => {
    const port = await closedPort();
    const database = await openDatabase({
      url: `postgres://compute:pw-never-shown@127.0.0.1:${port}/compute`,
    });
    try {
      const failure = await sql`select 1`.execute(database.db).catch((error: unknown) => error);
      expect(failure).toMatchObject({
        code: 'UNAVAILABLE',
        message: `the database postgres://compute:***@127.0.0.1:${port}/compute cannot be used: nothing listens there (ECONNREFUSED)`,
        details: { code: 'ECONNREFUSED' },
        operatorOnly: true,
      });
      expect(JSON.stringify(failure)).not.toContain('pw-never-shown');
    } finally {
      await database.close();
    }
  });
});
