/**
 * Every method of the table against every kind of caller, with the real embedded Better IAM:
 * no credential, another tenant's credential, and the built-in roles viewer, member, operator,
 * tenant admin and platform admin. The first two are decided by the pipeline before any input is
 * read, so they go through the handler for every method; the roles are decided by IAM on each
 * method's own action and resource, so they go through the bridge for every method, and through the
 * handler for a sample of real calls.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnyMethod, type Identity, methodAction, methodKey, methodPath } from '@better-compute/core';
import { methodList } from '@better-compute/core/methods';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { betterCompute, type ComputeInstance } from '../src/index.js';

const kinds = await testDatabaseKinds();

type Role = 'viewer' | 'member' | 'operator' | 'tenant-admin' | 'platform-admin';

const OPERATOR_GROUPS = [
  'nodes',
  'pools',
  'sites',
  'capacity',
  'reservations',
  'offers',
  'events',
  'quotas',
  'join-tokens',
  'join-requests',
  // Site tokens were the operator's from IAM's first migration, before the group existed.
  'site-tokens',
  'usage',
  'releases',
  'rollouts',
];

/** What each built-in role may do, as the product promises it (not read from IAM's tables). */
function expected(role: Role, action: string): boolean {
  const [, group = '', verb = ''] = action.split(':');
  switch (role) {
    case 'platform-admin':
      return true;
    case 'tenant-admin':
      return action !== 'compute:fleet:admin';
    case 'operator':
      // Operators keep the fleet's secrets (iam migration 0006): put and delete, not use.
      return (
        verb === 'read' ||
        OPERATOR_GROUPS.includes(group) ||
        ['compute:secrets:write', 'compute:secrets:delete'].includes(action)
      );
    case 'member':
      return (
        verb === 'read' ||
        // Extend and release only its own (@own): these checks name no owner (reservation-owners.test.ts).
        // Sandboxes and their volumes likewise: a member creates them, and the rest only on its own
        // (sandbox-volume-owners.test.ts).
        [
          'compute:reservations:create',
          'compute:sandboxes:create',
          'compute:sandbox-volumes:create',
        ].includes(action)
      );
    case 'viewer':
      return verb === 'read';
  }
}

/** An input whose every field is a plausible value, enough for a method's resource function. */
const anyInput = new Proxy({} as Record<string, unknown>, {
  get: (_target, field) =>
    field === 'tenantId'
      ? 'acme'
      : typeof field === 'string'
        ? `${field.replace(/Id$/, '')}_01m00000000000000000000000`
        : undefined,
});

describe.each(kinds)('the authorization matrix on %s', (kind) => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  const keys = {} as Record<Role | 'foreign', string>;
  const identities = {} as Record<Role, Identity>;

  beforeAll(async () => {
    database = await createTestDatabase(kind);
    compute = await betterCompute({ database, rateLimit: false }, { log: () => {} });
    await compute.migrate();
    const iam = compute.embeddedIam!;
    const dev = (await iam.bootstrapDev())!;
    keys['platform-admin'] = dev.rootAdmin.apiKey;
    keys['tenant-admin'] = dev.acmeAdmin.apiKey;
    keys.member = dev.acmeMember.apiKey;
    for (const role of ['viewer', 'operator'] as const) {
      const person = await iam.createPerson({ tenantId: 'acme', email: `${role}@acme.test` });
      await iam.createBinding({ tenantId: 'acme', role, principalId: person.id });
      keys[role] = (await iam.createApiKey(person.id, { name: role })).key;
    }
    await iam.createTenant({ id: 'globex', name: 'Globex' });
    const stranger = await iam.createPerson({ tenantId: 'globex', email: 'admin@globex.test' });
    await iam.createBinding({ tenantId: 'globex', role: 'tenant-admin', principalId: stranger.id });
    keys.foreign = (await iam.createApiKey(stranger.id, { name: 'globex' })).key;
    for (const role of ['viewer', 'member', 'operator', 'tenant-admin', 'platform-admin'] as const) {
      identities[role] = (await compute.iam.authenticate(keys[role]))!;
    }
  });
  afterAll(async () => {
    await compute?.close();
    await database?.close();
  });

  async function call(method: AnyMethod, body: Record<string, unknown>, token?: string) {
    const response = await compute.handler(
      new Request(`http://localhost/api/compute${methodPath(method)}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: JSON.stringify(body),
      }),
    );
    return {
      status: response.status,
      body: (await response.json()) as { error?: { code: string; details?: { reason?: string } } },
    };
  }

  it('covers a real table', () => {
    expect(methodList.length).toBeGreaterThan(40);
  });

  it('without a credential, every method but the public ones is UNAUTHENTICATED', async () => {
    for (const method of methodList) {
      const { body } = await call(method, { tenantId: 'acme' });
      if ('public' in method.access) expect(body.error?.code, methodKey(method)).not.toBe('UNAUTHENTICATED');
      else expect(body.error?.code, methodKey(method)).toBe('UNAUTHENTICATED');
    }
  });

  it('another tenant’s credential is refused on every tenant-scoped method before its input is read', async () => {
    for (const method of methodList.filter((m) => m.tenantScoped && !('public' in m.access))) {
      const { status, body } = await call(method, { tenantId: 'acme', garbage: true }, keys.foreign);
      expect([status, body.error?.code, body.error?.details?.reason], methodKey(method)).toEqual([
        403,
        'ACCESS_DENIED',
        'foreign-tenant',
      ]);
    }
  });

  it.each(['viewer', 'member', 'operator', 'tenant-admin', 'platform-admin'] as const)(
    '%s: IAM decides every action as the role promises',
    async (role) => {
      const mismatches: string[] = [];
      for (const method of methodList) {
        const action = methodAction(method);
        if (!action) continue;
        const resource = { type: 'tenant', id: 'acme', ...method.resource?.(anyInput), tenantId: 'acme' };
        const [decision] = await compute.iam.authorize(identities[role], [{ action, resource }]);
        if (decision?.allowed !== expected(role, action))
          mismatches.push(
            `${methodKey(method)} (${action}): ${decision?.allowed ? 'allowed' : 'denied'}, ${decision?.reason}`,
          );
      }
      expect(mismatches).toEqual([]);
    },
  );

  it('through the handler, real calls meet the same decisions', async () => {
    const byName = new Map(methodList.map((m) => [methodKey(m), m]));
    const site = (role: Role) =>
      call(
        byName.get('sites.create')!,
        { tenantId: 'acme', name: `site-${role}`, region: 'eu-west' },
        keys[role],
      );
    expect((await site('viewer')).body.error?.code).toBe('ACCESS_DENIED');
    expect((await site('member')).body.error?.code).toBe('ACCESS_DENIED');
    expect((await site('tenant-admin')).status).toBe(200);
    const events = (role: Role) => call(byName.get('events.list')!, { tenantId: 'acme' }, keys[role]);
    for (const role of ['viewer', 'member', 'operator', 'tenant-admin', 'platform-admin'] as const) {
      expect((await events(role)).status, role).toBe(200);
    }
  });
});
