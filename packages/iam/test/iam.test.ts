import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as OTPAuth from 'otpauth';
import type { Identity } from '@better-compute/core';
import { testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { createIam, type Iam } from '../src/index.js';
import { migratedDatabase, QueryCounter, testClock, type TestClock, uniqueTenant } from './helpers.js';

const kinds = await testDatabaseKinds();

const COMPUTE_CATALOG = [
  { action: 'compute:reservations:create', summary: 'reserve' },
  { action: 'compute:reservations:release', summary: 'release' },
  { action: 'compute:reservations:get', summary: 'get' },
  { action: 'compute:reservations:list', summary: 'list' },
  { action: 'compute:sandboxes:create', summary: 'create' },
  { action: 'compute:sandboxes:delete', summary: 'delete' },
  { action: 'compute:nodes:cordon', summary: 'cordon' },
  { action: 'compute:events:read', summary: 'events' },
  { action: 'compute:fleet:admin', summary: 'fleet admin' },
];

function codeFor(secret: string, at: Date): string {
  return new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret), digits: 6, period: 30 }).generate({
    timestamp: at.getTime(),
  });
}

describe.each(kinds)('Better IAM on %s', (kind) => {
  let database: TestDatabase;
  let clock: TestClock;
  let iam: Iam;

  beforeAll(async () => {
    database = await migratedDatabase(kind);
    clock = testClock();
    iam = createIam({ database, clock: clock.now });
    await iam.ready();
    await iam.installActions(COMPUTE_CATALOG);
  });
  afterAll(async () => {
    await iam?.close();
    await database?.close();
  });

  async function tenantWithPeople() {
    const tenantId = uniqueTenant();
    await iam.createTenant({ id: tenantId, name: 'Test' });
    const admin = await iam.createPerson({
      tenantId,
      email: `admin@${tenantId}.test`,
      password: 'correct horse battery',
    });
    const member = await iam.createPerson({
      tenantId,
      email: `member@${tenantId}.test`,
      password: 'correct horse battery',
    });
    await iam.createBinding({ tenantId, role: 'tenant-admin', principalId: admin.id });
    await iam.createBinding({ tenantId, role: 'member', principalId: member.id });
    const adminKey = await iam.createApiKey(admin.id, { name: 'test' });
    const memberKey = await iam.createApiKey(member.id, { name: 'test' });
    const adminIdentity = (await iam.authenticate(adminKey.key))!;
    const memberIdentity = (await iam.authenticate(memberKey.key))!;
    return { tenantId, admin, member, adminKey, memberKey, adminIdentity, memberIdentity };
  }

  const check = (action: string, tenantId: string, extra: Record<string, string> = {}) => ({
    action,
    resource: { type: 'compute-reservation', tenantId, ...extra },
  });

  it('the migration creates the root tenant', async () => {
    expect(await iam.tenantState('root')).toBe('active');
    expect((await iam.getTenant('root')).parentId).toBeNull();
  });

  it('a person signs in with a password and the session token authenticates', async () => {
    const { tenantId, member } = await tenantWithPeople();
    const { token, session } = await iam.signIn(`member@${tenantId}.test`, 'correct horse battery', tenantId);
    expect(token).toMatch(/^biam_ses_[A-Za-z0-9_-]{43}$/);
    expect(session.mfa).toBe(false);
    const identity = await iam.authenticate(token);
    expect(identity).toMatchObject({
      principalId: member.id,
      tenantId,
      principalKind: 'person',
      credentialKind: 'session',
      credentialId: session.id,
      mfa: false,
    });
    expect(JSON.stringify(identity)).not.toContain(token);
  });

  it('a wrong password and an unknown email get the same UNAUTHENTICATED message', async () => {
    const { tenantId } = await tenantWithPeople();
    const wrong = await iam
      .signIn(`member@${tenantId}.test`, 'wrong password!', tenantId)
      .catch((e: unknown) => e);
    const unknown = await iam
      .signIn(`nobody@${tenantId}.test`, 'correct horse battery', tenantId)
      .catch((e: unknown) => e);
    const otherTenant = await iam
      .signIn(`member@${tenantId}.test`, 'correct horse battery', 'root')
      .catch((e: unknown) => e);
    for (const error of [wrong, unknown, otherTenant]) {
      expect(error).toMatchObject({ code: 'UNAUTHENTICATED', message: 'invalid email, password or tenant' });
    }
  });

  it('once TOTP is confirmed, sign-in needs a current code and the session carries mfa', async () => {
    const { tenantId, member } = await tenantWithPeople();
    const { secret, uri } = await iam.enrollTotp(member.id);
    expect(uri).toMatch(/^otpauth:\/\/totp\//);
    await expect(iam.confirmTotp(member.id, '000000')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await iam.confirmTotp(member.id, codeFor(secret, clock.now()));
    const email = `member@${tenantId}.test`;
    await expect(iam.signIn(email, 'correct horse battery', tenantId)).rejects.toMatchObject({
      code: 'UNAUTHENTICATED',
      details: { mfaRequired: true },
    });
    // The code used to confirm cannot be replayed; the next time step's can.
    clock.advance(30_000);
    const code = codeFor(secret, clock.now());
    const { token, session } = await iam.signIn(email, 'correct horse battery', tenantId, code);
    expect(session.mfa).toBe(true);
    expect((await iam.authenticate(token))?.mfa).toBe(true);
    await expect(iam.signIn(email, 'correct horse battery', tenantId, code)).rejects.toMatchObject({
      code: 'UNAUTHENTICATED',
      message: 'invalid TOTP code',
    });
    await expect(
      iam.signIn(email, 'wrong password!', tenantId, codeFor(secret, clock.now())),
    ).rejects.toMatchObject({
      message: 'invalid email, password or tenant',
    });
  });

  it('after five failed sign-ins an account waits, longer after each further failure; success resets it', async () => {
    const { tenantId } = await tenantWithPeople();
    const email = `member@${tenantId}.test`;
    const failOnce = () =>
      expect(iam.signIn(email, 'not the password', tenantId)).rejects.toMatchObject({
        code: 'UNAUTHENTICATED',
      });
    for (let i = 0; i < 5; i++) await failOnce();
    // Even the right password waits now: the lock does not tell a right guess from a wrong one.
    const locked = await iam.signIn(email, 'correct horse battery', tenantId).catch((e: unknown) => e);
    expect(locked).toMatchObject({ code: 'RATE_LIMITED' });
    const waitMs = (e: unknown) => (e as { details: { retryAfterMs: number } }).details.retryAfterMs;
    expect(waitMs(locked)).toBeGreaterThan(29_000);
    expect(waitMs(locked)).toBeLessThanOrEqual(30_000);
    clock.advance(30_001);
    await failOnce();
    const longer = await iam.signIn(email, 'correct horse battery', tenantId).catch((e: unknown) => e);
    expect(longer).toMatchObject({ code: 'RATE_LIMITED' });
    expect(waitMs(longer)).toBeGreaterThan(59_000);
    expect(waitMs(longer)).toBeLessThanOrEqual(60_000);
    clock.advance(60_001);
    const { token } = await iam.signIn(email, 'correct horse battery', tenantId);
    expect(await iam.authenticate(token)).not.toBeNull();
    // The success forgot the failures: four more fail without a wait.
    for (let i = 0; i < 4; i++) await failOnce();
    await expect(iam.signIn(email, 'correct horse battery', tenantId)).resolves.toMatchObject({});
    // An email nobody has is throttled the same way, so the answer tells nothing of who exists.
    const nobody = `nobody@${tenantId}.test`;
    for (let i = 0; i < 5; i++)
      await expect(iam.signIn(nobody, 'guess', tenantId)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    await expect(iam.signIn(nobody, 'guess', tenantId)).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    // Failures more than 15 minutes apart do not add up.
    const spaced = `spaced@${tenantId}.test`;
    for (let i = 0; i < 6; i++) {
      await expect(iam.signIn(spaced, 'guess', tenantId)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
      clock.advance(16 * 60_000);
    }
  });

  it('a wrong TOTP code counts as a failed sign-in', async () => {
    const { tenantId, member } = await tenantWithPeople();
    const { secret } = await iam.enrollTotp(member.id);
    await iam.confirmTotp(member.id, codeFor(secret, clock.now()));
    clock.advance(30_000);
    const email = `member@${tenantId}.test`;
    // Being asked for the code is not a failure; a wrong code is.
    for (let i = 0; i < 3; i++)
      await expect(iam.signIn(email, 'correct horse battery', tenantId)).rejects.toMatchObject({
        details: { mfaRequired: true },
      });
    for (let i = 0; i < 5; i++)
      await expect(iam.signIn(email, 'correct horse battery', tenantId, '000000')).rejects.toMatchObject({
        message: 'invalid TOTP code',
      });
    await expect(
      iam.signIn(email, 'correct horse battery', tenantId, codeFor(secret, clock.now())),
    ).rejects.toMatchObject({ code: 'RATE_LIMITED' });
  });

  it('an expired session is refused, even while cached', async () => {
    const { tenantId } = await tenantWithPeople();
    const { token } = await iam.signIn(`member@${tenantId}.test`, 'correct horse battery', tenantId);
    expect(await iam.authenticate(token)).not.toBeNull();
    expect(await iam.authenticate(token)).not.toBeNull();
    clock.advance(12 * 3600_000 + 1000);
    expect(await iam.authenticate(token)).toBeNull();
    expect(await iam.authenticate(token)).toBeNull();
  });

  it('an API key works until it is revoked, and is refused on the very next call with a warm cache', async () => {
    const { member } = await tenantWithPeople();
    const { key, apiKey } = await iam.createApiKey(member.id, { name: 'ci' });
    expect(key).toMatch(/^biam_key_[A-Za-z0-9_-]{43}$/);
    expect(JSON.stringify(apiKey)).not.toContain(key);
    expect((await iam.authenticate(key))?.credentialKind).toBe('api-key');
    expect((await iam.authenticate(key))?.credentialId).toBe(apiKey.id);
    await iam.revokeApiKey(apiKey.id);
    expect(await iam.authenticate(key)).toBeNull();
    expect(
      (await iam.listApiKeys(member.id)).items.find((k) => k.id === apiKey.id)?.revokedAt,
    ).not.toBeNull();
  });

  it('an expired API key is refused', async () => {
    const { member } = await tenantWithPeople();
    const { key } = await iam.createApiKey(member.id, {
      name: 'short',
      expiresAt: new Date(clock.now().getTime() + 60_000),
    });
    expect(await iam.authenticate(key)).not.toBeNull();
    clock.advance(61_000);
    expect(await iam.authenticate(key)).toBeNull();
  });

  it('an API key lives at most 10 years; a far-future expiry is INVALID_ARGUMENT (issue 15)', async () => {
    const { member } = await tenantWithPeople();
    const year = 365.25 * 24 * 3600 * 1000;
    await expect(
      iam.createApiKey(member.id, { name: 'ok', expiresAt: new Date(clock.now().getTime() + 9.9 * year) }),
    ).resolves.toMatchObject({ apiKey: { name: 'ok' } });
    for (const expiresAt of [
      new Date(clock.now().getTime() + 10.1 * year).toISOString(),
      '+275760-09-13T00:00:00.000Z',
      '9999-12-31T23:59:59Z',
    ]) {
      await expect(iam.createApiKey(member.id, { name: 'forever', expiresAt })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: 'expiresAt must be within 10 years from now',
      });
    }
  });

  it('unknown, malformed and forged credentials are refused', async () => {
    expect(await iam.authenticate('biam_key_' + 'A'.repeat(43))).toBeNull();
    expect(await iam.authenticate('biam_ses_short')).toBeNull();
    expect(await iam.authenticate('nonsense')).toBeNull();
    expect(await iam.authenticate('eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln')).toBeNull();
  });

  it('a warm authenticate and authorize touch no database', async () => {
    const { tenantId, memberKey } = await tenantWithPeople();
    const counter = new QueryCounter();
    const counted = createIam({
      database: { ...database, db: database.db.withPlugin(counter) },
      clock: clock.now,
    });
    try {
      await counted.ready();
      const identity = (await counted.authenticate(memberKey.key))!;
      await counted.authorize(identity, [check('compute:reservations:create', tenantId)]);
      counter.count = 0;
      const started = performance.now();
      for (let i = 0; i < 1000; i++) {
        const again = (await counted.authenticate(memberKey.key))!;
        const [decision] = await counted.authorize(again, [check('compute:reservations:create', tenantId)]);
        expect(decision?.allowed).toBe(true);
      }
      const perCall = (performance.now() - started) / 1000;
      expect(counter.count).toBe(0);
      // Not a benchmark (bench/ measures); a guard against a warm path that waits on something.
      expect(perCall).toBeLessThan(1);
    } finally {
      await counted.close();
    }
  });

  it('a revoked binding is refused on the next authorize', async () => {
    const { tenantId, member, memberIdentity } = await tenantWithPeople();
    const binding = (await iam.listBindings({ tenantId, principalId: member.id })).items[0]!;
    expect(
      (await iam.authorize(memberIdentity, [check('compute:reservations:create', tenantId)]))[0],
    ).toEqual({
      allowed: true,
      reason: `allowed by binding ${binding.id} (role member at tenant ${tenantId})`,
    });
    await iam.revokeBinding(binding.id);
    expect(
      (await iam.authorize(memberIdentity, [check('compute:reservations:create', tenantId)]))[0],
    ).toEqual({
      allowed: false,
      reason: `no binding of ${member.id} grants compute:reservations:create on compute-reservation in tenant ${tenantId}`,
    });
  });

  it('suspending a tenant shows in tenantState at once, and its bindings stop working', async () => {
    const { tenantId, memberIdentity } = await tenantWithPeople();
    expect(await iam.tenantState(tenantId)).toBe('active');
    await iam.suspendTenant(tenantId);
    expect(await iam.tenantState(tenantId)).toBe('suspended');
    expect(
      (await iam.authorize(memberIdentity, [check('compute:reservations:create', tenantId)]))[0]?.allowed,
    ).toBe(false);
    await iam.reactivateTenant(tenantId);
    expect(await iam.tenantState(tenantId)).toBe('active');
    expect(
      (await iam.authorize(memberIdentity, [check('compute:reservations:create', tenantId)]))[0]?.allowed,
    ).toBe(true);
    await iam.deleteTenant(tenantId);
    expect(await iam.tenantState(tenantId)).toBe('deleted');
    expect(await iam.tenantState('no-such-tenant')).toBeNull();
    await expect(iam.suspendTenant('root')).rejects.toMatchObject({ code: 'INVALID_STATE' });
  });

  it('a disabled principal is refused at once, and allowed again once enabled', async () => {
    const { member, memberKey, tenantId } = await tenantWithPeople();
    expect(await iam.authenticate(memberKey.key)).not.toBeNull();
    await iam.disablePrincipal(member.id);
    expect(await iam.authenticate(memberKey.key)).toBeNull();
    await expect(
      iam.signIn(`member@${tenantId}.test`, 'correct horse battery', tenantId),
    ).rejects.toMatchObject({
      message: 'invalid email, password or tenant',
    });
    await iam.enablePrincipal(member.id);
    expect(await iam.authenticate(memberKey.key)).not.toBeNull();
  });

  it('a platform operator acts in any tenant; a tenant admin only in its own', async () => {
    const acme = await tenantWithPeople();
    const globex = await tenantWithPeople();
    const operator = await iam.createPerson({
      tenantId: 'root',
      email: `ops-${acme.tenantId}@root.test`,
      password: 'correct horse battery',
    });
    await iam.createBinding({ tenantId: 'root', role: 'operator', principalId: operator.id });
    const operatorIdentity = (await iam.authenticate(
      (await iam.createApiKey(operator.id, { name: 'ops' })).key,
    ))!;
    const [inAcme, inGlobex] = await iam.authorize(operatorIdentity, [
      check('compute:nodes:cordon', acme.tenantId),
      check('compute:nodes:cordon', globex.tenantId),
    ]);
    expect(inAcme?.allowed).toBe(true);
    expect(inGlobex?.allowed).toBe(true);
    const [own, other] = await iam.authorize(acme.adminIdentity, [
      check('compute:nodes:cordon', acme.tenantId),
      check('compute:nodes:cordon', globex.tenantId),
    ]);
    expect(own?.allowed).toBe(true);
    expect(other).toEqual({
      allowed: false,
      reason: `no binding of ${acme.admin.id} grants compute:nodes:cordon on compute-reservation in tenant ${globex.tenantId}`,
    });
  });

  it('compute:fleet:admin is only for root administrators', async () => {
    const acme = await tenantWithPeople();
    const root = await iam.createPerson({
      tenantId: 'root',
      email: `root-${acme.tenantId}@root.test`,
      password: 'correct horse battery',
    });
    await iam.createBinding({ tenantId: 'root', role: 'platform-admin', principalId: root.id });
    const ops = await iam.createPerson({
      tenantId: 'root',
      email: `ops2-${acme.tenantId}@root.test`,
      password: 'correct horse battery',
    });
    await iam.createBinding({ tenantId: 'root', role: 'operator', principalId: ops.id });
    const rootIdentity = (await iam.authenticate((await iam.createApiKey(root.id, { name: 'r' })).key))!;
    const opsIdentity = (await iam.authenticate((await iam.createApiKey(ops.id, { name: 'o' })).key))!;
    const fleet = { action: 'compute:fleet:admin', resource: { type: 'compute-fleet', tenantId: 'root' } };
    expect((await iam.authorize(rootIdentity, [fleet]))[0]?.allowed).toBe(true);
    expect((await iam.authorize(opsIdentity, [fleet]))[0]).toEqual({
      allowed: false,
      reason: 'compute:fleet:admin is only for root administrators',
    });
    const inAcme = {
      action: 'compute:fleet:admin',
      resource: { type: 'compute-fleet', tenantId: acme.tenantId },
    };
    expect((await iam.authorize(acme.adminIdentity, [inAcme]))[0]).toEqual({
      allowed: false,
      reason: 'compute:fleet:admin is only for root administrators',
    });
    // Even a custom role naming it exactly, bound in a tenant, does not reach it.
    await iam.createRole({
      tenantId: acme.tenantId,
      name: 'fleet-wannabe',
      actions: ['compute:fleet:admin'],
    });
    await iam.createBinding({ tenantId: acme.tenantId, role: 'fleet-wannabe', principalId: acme.member.id });
    expect((await iam.authorize(acme.memberIdentity, [inAcme]))[0]?.allowed).toBe(false);
    await expect(
      iam.createBinding({ tenantId: acme.tenantId, role: 'platform-admin', principalId: acme.admin.id }),
    ).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
  });

  it('a custom role naming an unknown action is refused', async () => {
    const { tenantId, member, memberIdentity } = await tenantWithPeople();
    await expect(
      iam.createRole({ tenantId, name: 'typo', actions: ['compute:reservatons:create'] }),
    ).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'compute:reservatons:create matches no known action',
    });
    await expect(
      iam.createRole({ tenantId, name: 'bad', actions: ['Compute Everything'] }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    const role = await iam.createRole({
      tenantId,
      name: 'reader',
      actions: ['compute:reservations:get', 'iam:principals:*'],
    });
    expect(role.builtIn).toBe(false);
    await iam.createBinding({
      tenantId,
      role: role.id,
      principalId: member.id,
      scope: { type: 'resource', resourceType: 'compute-reservation', id: 'rsv_1' },
    });
    const [one, other] = await iam.authorize(memberIdentity, [
      { action: 'iam:principals:disable', resource: { type: 'compute-reservation', id: 'rsv_1', tenantId } },
      { action: 'iam:principals:disable', resource: { type: 'compute-reservation', id: 'rsv_2', tenantId } },
    ]);
    expect(one?.allowed).toBe(true);
    expect(other?.allowed).toBe(false);
  });

  it('a member may delete only its own sandboxes', async () => {
    const { tenantId, member, admin, memberIdentity } = await tenantWithPeople();
    const sandbox = (ownerId: string) => ({
      action: 'compute:sandboxes:delete',
      resource: { type: 'compute-sandbox', id: 'sbx_x', tenantId, ownerId },
    });
    const [own, theirs] = await iam.authorize(memberIdentity, [sandbox(member.id), sandbox(admin.id)]);
    expect(own?.allowed).toBe(true);
    expect(theirs?.allowed).toBe(false);
    expect(theirs?.reason).toContain(`allows compute:sandboxes:delete only on ${member.id}'s own resources`);
  });

  it('project-scoped bindings apply only inside the project', async () => {
    const { tenantId, admin } = await tenantWithPeople();
    const sa = await iam.createServiceAccount({ tenantId, displayName: 'ci' });
    await iam.createBinding({
      tenantId,
      role: 'member',
      principalId: sa.id,
      scope: { type: 'project', id: 'proj_a' },
    });
    const identity = (await iam.authenticate((await iam.createApiKey(sa.id, { name: 'ci' })).key))!;
    expect(identity.principalKind).toBe('service-account');
    expect(sa.id).toMatch(/^sa_/);
    const inProject = {
      action: 'compute:reservations:create',
      resource: { type: 'compute-reservation', tenantId, projectId: 'proj_a' },
    };
    const outside = {
      action: 'compute:reservations:create',
      resource: { type: 'compute-reservation', tenantId, projectId: 'proj_b' },
    };
    const decisions = await iam.authorize(identity, [inProject, outside]);
    expect(decisions.map((d) => d.allowed)).toEqual([true, false]);
    void admin;
  });

  it('group bindings apply to the group’s members', async () => {
    const { tenantId } = await tenantWithPeople();
    const person = await iam.createPerson({ tenantId, email: `grouped@${tenantId}.test` });
    const group = await iam.createGroup({ tenantId, name: 'researchers' });
    const binding = await iam.createBinding({ tenantId, role: 'member', groupId: group.id });
    const identity = (await iam.authenticate((await iam.createApiKey(person.id, { name: 'k' })).key))!;
    expect(
      (await iam.authorize(identity, [check('compute:reservations:create', tenantId)]))[0]?.allowed,
    ).toBe(false);
    await iam.addGroupMember(group.id, person.id);
    expect((await iam.authorize(identity, [check('compute:reservations:create', tenantId)]))[0]).toEqual({
      allowed: true,
      reason: `allowed by binding ${binding.id} (role member at tenant ${tenantId}, through group ${group.id})`,
    });
  });

  it('an agent is limited to the intersection of its bindings and its person’s', async () => {
    const { tenantId, member } = await tenantWithPeople();
    const agent = await iam.createAgent({ tenantId, displayName: 'helper', actingFor: member.id });
    expect(agent.id).toMatch(/^agt_/);
    const role = await iam.createRole({
      tenantId,
      name: 'agent-role',
      actions: ['compute:reservations:*', 'compute:nodes:cordon'],
    });
    await iam.createBinding({ tenantId, role: role.id, principalId: agent.id });
    const identity = (await iam.authenticate(
      (await iam.createApiKey(agent.id, { name: 'agent' })).key,
    )) as Identity;
    expect(identity.principalKind).toBe('agent');
    const [reserve, cordon, events] = await iam.authorize(identity, [
      check('compute:reservations:create', tenantId),
      check('compute:nodes:cordon', tenantId),
      check('compute:events:read', tenantId),
    ]);
    expect(reserve?.allowed).toBe(true);
    expect(cordon?.allowed).toBe(false);
    expect(cordon?.reason).toContain(`acts for ${member.id}, who is not allowed`);
    expect(events?.allowed).toBe(false);
    await iam.disablePrincipal(member.id);
    expect(await iam.authenticate((await iam.createApiKey(agent.id, { name: 'agent2' })).key)).toBeNull();
    await expect(
      iam.createAgent({ tenantId, displayName: 'orphan', actingFor: agent.id }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('session JWTs authenticate until their session is revoked, and verify against the JWKS', async () => {
    const { tenantId, member } = await tenantWithPeople();
    const { session } = await iam.signIn(`member@${tenantId}.test`, 'correct horse battery', tenantId);
    const { token, expiresAt } = await iam.issueSessionJwt(session.id);
    expect(Date.parse(expiresAt) - clock.now().getTime()).toBeLessThanOrEqual(600_000);
    const identity = await iam.authenticate(token);
    expect(identity).toMatchObject({
      principalId: member.id,
      credentialKind: 'jwt',
      credentialId: session.id,
      tenantId,
    });
    const { keys } = await iam.jwks();
    expect(keys[0]).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA' });
    expect(keys[0]).not.toHaveProperty('d');
    await iam.revokeSession(session.id);
    expect(await iam.authenticate(token)).toBeNull();
    clock.advance(0);
    const tampered = token.slice(0, -4) + (token.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    expect(await iam.authenticate(tampered)).toBeNull();
  });

  it('a JWT stops working when it expires', async () => {
    const { tenantId } = await tenantWithPeople();
    const { session } = await iam.signIn(`member@${tenantId}.test`, 'correct horse battery', tenantId);
    const { token } = await iam.issueSessionJwt(session.id);
    expect(await iam.authenticate(token)).not.toBeNull();
    clock.advance(601_000);
    expect(await iam.authenticate(token)).toBeNull();
  });

  it('sessions can be listed and revoked', async () => {
    const { tenantId, member } = await tenantWithPeople();
    const first = await iam.signIn(`member@${tenantId}.test`, 'correct horse battery', tenantId);
    await iam.signIn(`member@${tenantId}.test`, 'correct horse battery', tenantId);
    expect((await iam.listSessions(member.id)).items).toHaveLength(2);
    // Pages: one at a time, in id order, the second page after the first's cursor.
    const page1 = await iam.listSessions(member.id, { limit: 1 });
    expect(page1.items).toHaveLength(1);
    expect(page1.nextCursor).toBe(page1.items[0]!.id);
    const page2 = await iam.listSessions(member.id, { limit: 1, cursor: page1.nextCursor! });
    expect(page2.items).toHaveLength(1);
    expect(page2.items[0]!.id > page1.items[0]!.id).toBe(true);
    expect(page2.nextCursor).toBeNull();
    expect(await iam.authenticate(first.token)).not.toBeNull();
    await iam.signOut(first.session.id);
    expect(await iam.authenticate(first.token)).toBeNull();
    expect((await iam.listSessions(member.id)).items).toHaveLength(1);
  });

  it('bootstrapRootAdmin creates the root administrator once', async () => {
    // One PGlite per file: on PGlite, check the idempotent half on the shared database.
    const fresh = kind === 'postgres' ? await migratedDatabase('postgres') : null;
    const other = fresh ? createIam({ database: fresh }) : iam;
    try {
      if (fresh) {
        const result = await other.bootstrapRootAdmin({
          email: 'Boot@Root.test',
          password: 'correct horse battery',
        });
        expect(result.created).toBe(true);
        expect(result.principal?.email).toBe('boot@root.test');
        expect(await other.bootstrapDev()).toBeNull();
      } else {
        await other.bootstrapRootAdmin({ email: 'boot@root.test', password: 'correct horse battery' });
      }
      expect(
        await other.bootstrapRootAdmin({ email: 'x@root.test', password: 'correct horse battery' }),
      ).toEqual({ created: false, principal: null });
      expect(await other.hasRootAdministrator()).toBe(true);
    } finally {
      if (fresh) {
        await other.close();
        await fresh.close();
      }
    }
  });

  it('bootstrapDev creates the root admin, tenant acme with an admin and a member, and a key each', async () => {
    if (kind === 'pglite') return; // covered on postgres, where a fresh database is cheap
    const fresh = await migratedDatabase('postgres');
    const other = createIam({ database: fresh });
    try {
      const dev = (await other.bootstrapDev())!;
      expect(dev.rootAdmin).toMatchObject({
        tenantId: 'root',
        email: 'admin@root.localhost',
        role: 'platform-admin',
      });
      expect(dev.acmeAdmin).toMatchObject({ tenantId: 'acme', role: 'tenant-admin' });
      expect(dev.acmeMember).toMatchObject({ tenantId: 'acme', role: 'member' });
      for (const account of [dev.rootAdmin, dev.acmeAdmin, dev.acmeMember]) {
        expect((await other.authenticate(account.apiKey))?.principalId).toBe(account.principalId);
        expect((await other.signIn(account.email, account.password, account.tenantId)).principal.id).toBe(
          account.principalId,
        );
      }
      expect(await other.bootstrapDev()).toBeNull();
    } finally {
      await other.close();
      await fresh.close();
    }
  });
});
