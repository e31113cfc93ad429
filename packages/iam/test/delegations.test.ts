/**
 * Delegations (issue 36 item 2): an agent is created with its delegation, and its identity carries
 * it; its person or a tenant administrator replaces or revokes it, never an agent (its own least of
 * all) and never a colleague; a revoked or expired delegation stops the agent at once, as a
 * disabled person does; an agent changes nothing of IAM but its own credentials. Through IAM's
 * routes, with the real service.
 */
import { actionPatternMatches, DEFAULT_CONFIRM_PATTERNS } from '@better-compute/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { createIam, iamMigrations, type Iam } from '../src/index.js';
import { DEFAULT_CONFIRM } from '../src/areas/delegations.js';
import { compilePattern, patternMatches } from '../src/policy.js';
import { callIam, migratedDatabase, testClock, uniqueTenant } from './helpers.js';

const kinds = await testDatabaseKinds();
const PASSWORD = 'correct horse battery';

describe('the default confirm patterns', () => {
  it('are one list: the constant IAM uses, core’s, and the one migration 0005 backfilled', () => {
    expect(DEFAULT_CONFIRM).toBe(DEFAULT_CONFIRM_PATTERNS);
    const sql = iamMigrations.migrations.find((m) => m.name === '0005_delegations')!.sql;
    const backfilled = /array\[([^\]]*)\]/.exec(sql.slice(sql.indexOf('insert into iam.delegations')))![1]!;
    expect([...backfilled.matchAll(/'([^']+)'/g)].map((m) => m[1])).toEqual([...DEFAULT_CONFIRM]);
  });

  it('match actions as IAM’s role patterns do', () => {
    const actions = [
      'compute:instances:delete',
      'compute:nodes:retire',
      'compute:nodes:drain',
      'compute:webhooks:read',
      'compute:reservations:create',
      'compute:sandboxes:set-quota',
      'iam:delegations:create',
      'compute:a:b:delete',
    ];
    const patterns = [...DEFAULT_CONFIRM, '*', 'compute:*', 'compute:*:read', 'compute:nodes:*', 'iam:x'];
    for (const pattern of patterns)
      for (const action of actions)
        expect([pattern, action, actionPatternMatches(pattern, action)]).toEqual([
          pattern,
          action,
          patternMatches(compilePattern(pattern), action),
        ]);
  });
});

describe.each(kinds)('delegations on %s', (kind) => {
  let database: TestDatabase;
  let iam: Iam;
  const clock = testClock();

  beforeAll(async () => {
    database = await migratedDatabase(kind);
    iam = createIam({ database, clock: clock.now });
    await iam.ready();
  });
  afterAll(async () => {
    await iam?.close();
    await database?.close();
  });

  const call = (path: string, body: unknown, token: string) => callIam(iam, path, body, token);

  /** A tenant with a member person, their agent (member too), a colleague and an administrator. */
  async function setup() {
    const tenantId = uniqueTenant();
    await iam.createTenant({ id: tenantId, name: 'Delegations' });
    const person = await iam.createPerson({ tenantId, email: `p@${tenantId}.test`, password: PASSWORD });
    const colleague = await iam.createPerson({ tenantId, email: `c@${tenantId}.test`, password: PASSWORD });
    const admin = await iam.createPerson({ tenantId, email: `a@${tenantId}.test`, password: PASSWORD });
    await iam.createBinding({ tenantId, role: 'member', principalId: person.id });
    await iam.createBinding({ tenantId, role: 'member', principalId: colleague.id });
    await iam.createBinding({ tenantId, role: 'tenant-admin', principalId: admin.id });
    const agent = await iam.createAgent({ tenantId, displayName: 'assistant', actingFor: person.id });
    await iam.createBinding({ tenantId, role: 'member', principalId: agent.id });
    const key = async (id: string) => (await iam.createApiKey(id, { name: 'k' })).key;
    return {
      tenantId,
      person,
      agent,
      keys: {
        person: await key(person.id),
        colleague: await key(colleague.id),
        admin: await key(admin.id),
        agent: await key(agent.id),
      },
    };
  }

  it('an agent is created with its default delegation, and its identity carries it', async () => {
    const s = await setup();
    const identity = await iam.authenticate(s.keys.agent);
    expect(identity?.delegation).toEqual({
      id: expect.stringMatching(/^dlg_/),
      confirm: [...DEFAULT_CONFIRM],
      spendLimitGpuHours: null,
    });
    const page = await iam.listDelegations({ tenantId: s.tenantId, agentId: s.agent.id });
    expect(page.items).toEqual([
      expect.objectContaining({
        id: identity!.delegation!.id,
        agentId: s.agent.id,
        personId: s.person.id,
        state: 'active',
        createdBy: 'system',
      }),
    ]);
    // A person's identity carries none.
    expect((await iam.authenticate(s.keys.person))?.delegation).toBeUndefined();
  });

  it('the creator of an agent may set its patterns and limit in the same call', async () => {
    const s = await setup();
    const created = await call(
      'principals/create',
      {
        tenantId: s.tenantId,
        kind: 'agent',
        displayName: 'careful',
        actingFor: s.person.id,
        confirm: ['compute:*'],
        spendLimitGpuHours: 4,
      },
      s.keys.admin,
    );
    expect(created.status).toBe(200);
    const [delegation] = (await iam.listDelegations({ tenantId: s.tenantId, agentId: created.body.data.id }))
      .items;
    expect(delegation).toMatchObject({ confirm: ['compute:*'], spendLimitGpuHours: 4 });
    const bad = await call(
      'principals/create',
      { tenantId: s.tenantId, kind: 'agent', displayName: 'x', actingFor: s.person.id, confirm: ['a b'] },
      s.keys.admin,
    );
    expect(bad.body.error).toMatchObject({ code: 'INVALID_ARGUMENT', details: { field: 'confirm' } });
    // Nothing of the refused agent remains.
    expect((await iam.listPrincipals({ tenantId: s.tenantId, kind: 'agent' })).items).toHaveLength(2);
  });

  it('the person replaces their agent’s delegation; the agent’s next call carries the new one', async () => {
    const s = await setup();
    const before = (await iam.authenticate(s.keys.agent))!.delegation!;
    const replaced = await call(
      'delegations/create',
      { tenantId: s.tenantId, agentId: s.agent.id, confirm: ['compute:*:delete'], spendLimitGpuHours: 8 },
      s.keys.person,
    );
    expect(replaced.status).toBe(200);
    expect(replaced.body.data).toMatchObject({
      agentId: s.agent.id,
      personId: s.person.id,
      confirm: ['compute:*:delete'],
      spendLimitGpuHours: 8,
      createdBy: s.person.id,
      state: 'active',
    });
    const after = (await iam.authenticate(s.keys.agent))!.delegation!;
    expect(after).toEqual({
      id: replaced.body.data.id,
      confirm: ['compute:*:delete'],
      spendLimitGpuHours: 8,
    });
    expect((await iam.getDelegation(before.id)).state).toBe('revoked');
    // The person lists their agents' delegations; the agent reads its own.
    const mine = await call('delegations/list', { tenantId: s.tenantId }, s.keys.person);
    expect(mine.body.data.items.map((d: any) => d.id).sort()).toEqual([before.id, after.id].sort());
    const own = await call('delegations/get', { tenantId: s.tenantId, delegationId: after.id }, s.keys.agent);
    expect(own.status).toBe(200);
  });

  it('an agent cannot create, change or revoke a delegation, its own included, nor change IAM', async () => {
    const s = await setup();
    const own = (await iam.authenticate(s.keys.agent))!.delegation!;
    const attempts = [
      await call(
        'delegations/create',
        { tenantId: s.tenantId, agentId: s.agent.id, confirm: [] },
        s.keys.agent,
      ),
      await call('delegations/revoke', { tenantId: s.tenantId, delegationId: own.id }, s.keys.agent),
      await call(
        'principals/create',
        { tenantId: s.tenantId, kind: 'agent', displayName: 'child', actingFor: s.person.id, confirm: [] },
        s.keys.agent,
      ),
      await call(
        'bindings/create',
        { tenantId: s.tenantId, role: 'member', principalId: s.agent.id },
        s.keys.agent,
      ),
      await call('principals/disable', { tenantId: s.tenantId, principalId: s.person.id }, s.keys.agent),
    ];
    for (const attempt of attempts) {
      expect(attempt.status).toBe(403);
      expect(attempt.body.error.code).toBe('ACCESS_DENIED');
    }
    // The delegation is as it was, and the agent still manages its own key.
    expect((await iam.authenticate(s.keys.agent))!.delegation).toEqual(own);
    expect((await call('apiKeys/create', { tenantId: s.tenantId, name: 'own' }, s.keys.agent)).status).toBe(
      200,
    );
  });

  it('a colleague cannot set or revoke someone else’s agent’s delegation; an administrator can', async () => {
    const s = await setup();
    const own = (await iam.authenticate(s.keys.agent))!.delegation!;
    const create = await call(
      'delegations/create',
      { tenantId: s.tenantId, agentId: s.agent.id, confirm: [] },
      s.keys.colleague,
    );
    expect(create.body.error?.code).toBe('ACCESS_DENIED');
    const revoke = await call(
      'delegations/revoke',
      { tenantId: s.tenantId, delegationId: own.id },
      s.keys.colleague,
    );
    expect(revoke.body.error?.code).toBe('ACCESS_DENIED');
    expect(
      (await call('delegations/list', { tenantId: s.tenantId }, s.keys.colleague)).body.data.items,
    ).toEqual([]);
    const byAdmin = await call(
      'delegations/create',
      { tenantId: s.tenantId, agentId: s.agent.id, spendLimitGpuHours: 1 },
      s.keys.admin,
    );
    expect(byAdmin.body.data).toMatchObject({ confirm: [...DEFAULT_CONFIRM], spendLimitGpuHours: 1 });
  });

  it('another tenant’s person sees nothing and changes nothing', async () => {
    const s = await setup();
    const other = await setup();
    const own = (await iam.authenticate(s.keys.agent))!.delegation!;
    for (const token of [other.keys.person, other.keys.admin]) {
      const get = await call('delegations/get', { tenantId: s.tenantId, delegationId: own.id }, token);
      expect(get.status).toBeGreaterThanOrEqual(403);
      const revoke = await call('delegations/revoke', { tenantId: s.tenantId, delegationId: own.id }, token);
      expect(revoke.status).toBeGreaterThanOrEqual(403);
      const viaOwn = await call(
        'delegations/revoke',
        { tenantId: other.tenantId, delegationId: own.id },
        token,
      );
      expect([403, 404]).toContain(viaOwn.status);
    }
    expect((await iam.getDelegation(own.id)).state).toBe('active');
  });

  it('a revoked delegation stops the agent on its next call; the person revokes it', async () => {
    const s = await setup();
    const session = await iam.signIn(`p@${s.tenantId}.test`, PASSWORD, s.tenantId);
    const own = (await iam.authenticate(s.keys.agent))!.delegation!;
    expect(await iam.authenticate(s.keys.agent)).not.toBeNull();
    const revoked = await call(
      'delegations/revoke',
      { tenantId: s.tenantId, delegationId: own.id },
      session.token,
    );
    expect(revoked.body.data).toMatchObject({ id: own.id, state: 'revoked' });
    expect(await iam.authenticate(s.keys.agent)).toBeNull();
    expect(await iam.delegationState(own.id)).toBe('revoked');
    // The person and their other credentials are untouched; a new delegation brings the agent back.
    expect(await iam.authenticate(s.keys.person)).not.toBeNull();
    await iam.createDelegation({ agentId: s.agent.id });
    expect((await iam.authenticate(s.keys.agent))?.delegation?.id).not.toBe(own.id);
  });

  it('an expired delegation stops the agent, cached or not', async () => {
    const s = await setup();
    await iam.createDelegation({ agentId: s.agent.id, expiresAt: new Date(clock.now().getTime() + 60_000) });
    const identity = await iam.authenticate(s.keys.agent);
    expect(identity).not.toBeNull();
    clock.advance(61_000);
    expect(await iam.authenticate(s.keys.agent)).toBeNull();
    expect(await iam.delegationState(identity!.delegation!.id)).toBe('expired');
  });

  it('refuses patterns that are not action patterns and limits below zero', async () => {
    const s = await setup();
    for (const body of [
      { confirm: ['compute:*:delete@own'] },
      { confirm: ['x'.repeat(201)] },
      { confirm: ['compute:\u0000'] },
      { spendLimitGpuHours: -1 },
    ]) {
      const answer = await call(
        'delegations/create',
        { tenantId: s.tenantId, agentId: s.agent.id, ...body },
        s.keys.person,
      );
      expect(answer.status).toBe(400);
      expect(answer.body.error.code).toBe('INVALID_ARGUMENT');
    }
    const person = await call(
      'delegations/create',
      { tenantId: s.tenantId, agentId: s.person.id },
      s.keys.admin,
    );
    expect(person.status).toBe(400);
  });
});
