/**
 * The platform cannot lock itself out (issue 15): disabling the last enabled person of the root
 * tenant who holds platform-admin, or revoking that person's last platform-admin binding, is refused
 * and changes nothing; with a second administrator either is allowed. Two concurrent attempts to
 * remove the last two cannot both succeed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { createIam, type Iam } from '../src/index.js';
import { migratedDatabase } from './helpers.js';

const kinds = await testDatabaseKinds();

describe.each(kinds)('the last platform administrator on %s', (kind) => {
  let database: TestDatabase;
  let iam: Iam;

  beforeAll(async () => {
    database = await migratedDatabase(kind);
    iam = createIam({ database });
    await iam.ready();
  });
  afterAll(async () => {
    await iam?.close();
    await database?.close();
  });

  const rootAdmin = async (email: string) => {
    const person = await iam.createPerson({ tenantId: 'root', email, password: 'correct horse battery' });
    const binding = await iam.createBinding({
      tenantId: 'root',
      role: 'platform-admin',
      principalId: person.id,
    });
    return { person, binding };
  };

  it('cannot be disabled or unbound; a second one can, and then the first is the last again', async () => {
    const first = await rootAdmin('first@root.test');
    await expect(iam.disablePrincipal(first.person.id)).rejects.toMatchObject({
      code: 'INVALID_STATE',
      details: { reason: 'last-platform-admin' },
    });
    await expect(iam.revokeBinding(first.binding.id)).rejects.toMatchObject({
      code: 'INVALID_STATE',
      details: { reason: 'last-platform-admin' },
    });
    // Nothing changed.
    expect(await iam.hasRootAdministrator()).toBe(true);
    expect((await iam.getPrincipal(first.person.id)).disabled).toBe(false);

    const second = await rootAdmin('second@root.test');
    await iam.revokeBinding(second.binding.id);
    await expect(iam.disablePrincipal(first.person.id)).rejects.toMatchObject({ code: 'INVALID_STATE' });
    const third = await rootAdmin('third@root.test');
    expect((await iam.disablePrincipal(first.person.id)).disabled).toBe(true);
    await expect(iam.revokeBinding(third.binding.id)).rejects.toMatchObject({ code: 'INVALID_STATE' });
    await iam.enablePrincipal(first.person.id);
  });

  it('two concurrent removals of the last two administrators do not both succeed', async () => {
    const a = await rootAdmin('a@root.test');
    const b = await rootAdmin('b@root.test');
    // Leave exactly a and b: everyone else loses the role first (one at a time is allowed).
    for (const binding of (await iam.listBindings({ tenantId: 'root', limit: 500 })).items) {
      if (binding.roleName === 'platform-admin' && ![a.binding.id, b.binding.id].includes(binding.id))
        await iam.revokeBinding(binding.id);
    }
    const outcomes = await Promise.allSettled([
      iam.revokeBinding(a.binding.id),
      iam.disablePrincipal(b.person.id),
    ]);
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
    expect(await iam.hasRootAdministrator()).toBe(true);
  });
});
