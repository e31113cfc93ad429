/**
 * A route failure its answer does not tell (an unknown throw) is INTERNAL with a fixed message in
 * the answer, and goes whole to the log the deployment gave IAM.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '@better-compute/db/testing';
import { createIam, type Iam } from '../src/index.js';
import { migratedDatabase, uniqueTenant } from './helpers.js';

describe('an IAM route that fails unexpectedly', () => {
  let database: TestDatabase;
  let iam: Iam;
  const logged: { level: string; message: string; requestId: string; error: unknown }[] = [];

  beforeAll(async () => {
    database = await migratedDatabase('pglite');
    iam = createIam({ database, log: (entry) => logged.push(entry) });
    await iam.ready();
  });
  afterAll(async () => {
    await iam?.close?.();
    await database?.close();
  });

  it('answers INTERNAL without the cause, and logs the cause with the request id', async () => {
    const tenantId = uniqueTenant('f');
    await iam.createTenant({ id: tenantId, name: 'Failures' });
    await iam.createPerson({ tenantId, email: `p@${tenantId}.test`, password: 'a password of some length' });
    // The sessions table gone behind IAM's back: signing in throws an error IAM does not know.
    await sql`drop table iam.sessions cascade`.execute(database.db);
    const response = await iam.handler(
      new Request('http://localhost/api/iam/sessions/signIn', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': 'req_failure_1' },
        body: JSON.stringify({
          tenantId,
          email: `p@${tenantId}.test`,
          password: 'a password of some length',
        }),
      }),
    );
    expect(response.status).toBe(500);
    const text = await response.text();
    expect(JSON.parse(text)).toEqual({
      error: { code: 'INTERNAL', message: 'internal error', requestId: 'req_failure_1' },
    });
    expect(text).not.toContain('sessions');
    expect(logged).toEqual([
      expect.objectContaining({ level: 'error', message: 'IAM request failed', requestId: 'req_failure_1' }),
    ]);
    expect(String((logged[0]!.error as Error).message)).toContain('sessions');
  });
});
