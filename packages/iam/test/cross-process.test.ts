import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '@better-compute/db';
import { isPostgresReachable } from '@better-compute/db/testing';
import { createIam } from '../src/index.js';
import { migratedDatabase, uniqueTenant } from './helpers.js';

const postgres = await isPostgresReachable();

/**
 * Another replica hears of a change through its own LISTEN connection, a moment after the commit:
 * wait for it, within a bound far below any cache lifetime, and report how long it took.
 */
async function within<T>(ms: number, read: () => Promise<T>, expected: T): Promise<number> {
  const started = Date.now();
  while ((await read()) !== expected) {
    if (Date.now() - started > ms) throw new Error(`still ${String(!expected)} after ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return Date.now() - started;
}

// Two IAMs over two connection pools to one PostgreSQL database stand for two replicas: a change
// made through one reaches the other's cache through LISTEN/NOTIFY, not through shared memory.
describe.runIf(postgres)('two processes on one PostgreSQL', () => {
  it('a binding, tenant or key changed on one replica is refused by the other within moments, warm cache and all', async () => {
    const database = await migratedDatabase('postgres');
    const second = await openDatabase({ url: database.url!, poolSize: 2 });
    const one = createIam({ database });
    const two = createIam({ database: second, listenUrl: database.url! });
    try {
      await Promise.all([one.ready(), two.ready()]);
      const tenantId = uniqueTenant();
      await one.createTenant({ id: tenantId, name: 'x' });
      const person = await one.createPerson({ tenantId, email: `p@${tenantId}.test` });
      const binding = await one.createBinding({ tenantId, role: 'member', principalId: person.id });
      const { key, apiKey } = await one.createApiKey(person.id, { name: 'k' });
      const check = [
        { action: 'compute:reservations:create', resource: { type: 'compute-reservation', tenantId } },
      ];

      const identity = (await two.authenticate(key))!;
      expect(await two.authenticate(key)).not.toBeNull();
      expect((await two.authorize(identity, check))[0]?.allowed).toBe(true);

      await one.revokeBinding(binding.id);
      await within(2000, async () => (await two.authorize(identity, check))[0]?.allowed, false);

      await one.suspendTenant(tenantId);
      await within(2000, () => two.tenantState(tenantId), 'suspended');

      await one.revokeApiKey(apiKey.id);
      await within(2000, async () => (await two.authenticate(key)) === null, true);
    } finally {
      await one.close();
      await two.close();
      await second.close();
      await database.close();
    }
  });

  it('a replica whose LISTEN connection is cut reconnects, and hears the next change again', async () => {
    const database = await migratedDatabase('postgres');
    const second = await openDatabase({ url: database.url!, poolSize: 2 });
    const one = createIam({ database });
    const two = createIam({ database: second, listenUrl: database.url! });
    const listeners = async () =>
      (
        await sql<{ pid: number }>`select pid from pg_stat_activity
          where datname = current_database() and query like 'listen better_iam_changes%'`.execute(second.db)
      ).rows.map((row) => row.pid);
    try {
      await Promise.all([one.ready(), two.ready()]);
      const tenantId = uniqueTenant();
      await one.createTenant({ id: tenantId, name: 'x' });
      const person = await one.createPerson({ tenantId, email: `p@${tenantId}.test` });
      await one.createBinding({ tenantId, role: 'member', principalId: person.id });
      const { key, apiKey } = await one.createApiKey(person.id, { name: 'k' });
      expect(await two.authenticate(key)).not.toBeNull();

      // Both replicas listen; cut every LISTEN connection of this database, as a restart would.
      const before = await listeners();
      expect(before.length).toBeGreaterThanOrEqual(1);
      await sql`select pg_terminate_backend(pid) from unnest(${before}::int[]) as pid`.execute(second.db);
      await within(10_000, async () => (await listeners()).some((pid) => !before.includes(pid)), true);
      await within(10_000, async () => (await listeners()).length >= before.length, true);

      expect(await two.authenticate(key)).not.toBeNull();
      await one.revokeApiKey(apiKey.id);
      await within(2000, async () => (await two.authenticate(key)) === null, true);
    } finally {
      await one.close();
      await two.close();
      await second.close();
      await database.close();
    }
  });
});
