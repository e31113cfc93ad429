/**
 * An agent never exceeds its person, and never becomes it (issue 15): on IAM's own resources an
 * `@own` rule counts only the agent itself, so an agent whose role grants `iam:api-keys:*@own` and
 * `iam:sessions:*@own` (the built-in member and operator do) manages its own keys and sessions, and
 * not the person's: no key minted for the person, no listing or revoking the person's sessions or
 * keys, no second factor. Compute's `@own` resources (a sandbox) stay shared with the person.
 * Every `@own` rule of the built-in roles is tried here, through IAM's routes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { createIam, type Iam } from '../src/index.js';
import { callIam, migratedDatabase, uniqueTenant } from './helpers.js';

const kinds = await testDatabaseKinds();

describe.each(kinds)('an agent and its person’s IAM resources on %s', (kind) => {
  let database: TestDatabase;
  let iam: Iam;

  beforeAll(async () => {
    database = await migratedDatabase(kind);
    iam = createIam({ database });
    await iam.ready();
    await iam.installActions([{ action: 'compute:sandboxes:delete', summary: 'delete' }]);
  });
  afterAll(async () => {
    await iam?.close();
    await database?.close();
  });

  const call = (path: string, body: unknown, token: string) => callIam(iam, path, body, token);

  /** A tenant with a person bound to `role`, an agent acting for them bound to the same role, and a colleague. */
  async function setup(role: 'member' | 'operator' | 'viewer') {
    const tenantId = uniqueTenant();
    await iam.createTenant({ id: tenantId, name: 'Agents' });
    const email = `person@${tenantId}.test`;
    const person = await iam.createPerson({ tenantId, email, password: 'correct horse battery' });
    const colleague = await iam.createPerson({
      tenantId,
      email: `c@${tenantId}.test`,
      password: 'correct horse battery',
    });
    await iam.createBinding({ tenantId, role, principalId: person.id });
    await iam.createBinding({ tenantId, role, principalId: colleague.id });
    const agent = await iam.createAgent({ tenantId, displayName: 'assistant', actingFor: person.id });
    await iam.createBinding({ tenantId, role, principalId: agent.id });
    const session = await iam.signIn(email, 'correct horse battery', tenantId);
    const personKey = await iam.createApiKey(person.id, { name: 'laptop' });
    const agentKey = (await iam.createApiKey(agent.id, { name: 'agent' })).key;
    return { tenantId, person, colleague, agent, session, personKey, agentKey };
  }

  it.each(['member', 'operator'] as const)(
    'with %s: the agent manages its own keys and sessions only',
    async (role) => {
      const s = await setup(role);
      // Its own: allowed.
      expect((await call('apiKeys/create', { tenantId: s.tenantId, name: 'mine' }, s.agentKey)).status).toBe(
        200,
      );
      expect((await call('apiKeys/list', { tenantId: s.tenantId }, s.agentKey)).status).toBe(200);
      expect((await call('sessions/list', { tenantId: s.tenantId }, s.agentKey)).status).toBe(200);

      // The person's: refused, and nothing is created or revoked.
      const refusals = [
        await call(
          'apiKeys/create',
          { tenantId: s.tenantId, principalId: s.person.id, name: 'stolen' },
          s.agentKey,
        ),
        await call('apiKeys/list', { tenantId: s.tenantId, principalId: s.person.id }, s.agentKey),
        await call('apiKeys/revoke', { tenantId: s.tenantId, apiKeyId: s.personKey.apiKey.id }, s.agentKey),
        await call('sessions/list', { tenantId: s.tenantId, principalId: s.person.id }, s.agentKey),
        await call('sessions/revoke', { tenantId: s.tenantId, sessionId: s.session.session.id }, s.agentKey),
        // A colleague's: refused as before.
        await call(
          'apiKeys/create',
          { tenantId: s.tenantId, principalId: s.colleague.id, name: 'x' },
          s.agentKey,
        ),
      ];
      for (const refusal of refusals) {
        expect(refusal.status).toBe(403);
        expect(refusal.body.error.code).toBe('ACCESS_DENIED');
      }
      expect((await iam.listApiKeys(s.person.id, { limit: 50 })).items.map((k) => k.name)).toEqual([
        'laptop',
      ]);
      expect(await iam.authenticate(s.session.token)).not.toBeNull();

      // The person, with their own session, still manages their own.
      expect(
        (await call('apiKeys/create', { tenantId: s.tenantId, name: 'ci' }, s.session.token)).status,
      ).toBe(200);
      expect(
        (
          await call(
            'apiKeys/revoke',
            { tenantId: s.tenantId, apiKeyId: s.personKey.apiKey.id },
            s.session.token,
          )
        ).status,
      ).toBe(200);
    },
  );

  it('with viewer: the agent lists its own sessions, not the person’s', async () => {
    const s = await setup('viewer');
    expect((await call('sessions/list', { tenantId: s.tenantId }, s.agentKey)).status).toBe(200);
    expect(
      (await call('sessions/list', { tenantId: s.tenantId, principalId: s.person.id }, s.agentKey)).status,
    ).toBe(403);
  });

  it('a second factor is set up only from the person’s password session: not by an agent, not with an API key (issue 15)', async () => {
    const s = await setup('member');
    const enrol = await call('totp/enroll', {}, s.agentKey);
    expect(enrol.status).toBe(403);
    expect(enrol.body.error.code).toBe('ACCESS_DENIED');
    // Nor does the person's API key: only a session signed in with the password sets one up.
    const withKey = await call('totp/enroll', {}, s.personKey.key);
    expect(withKey.status).toBe(403);
    expect(withKey.body.error.details.reason).toBe('password-session-required');
    expect((await call('totp/enroll', {}, s.session.token)).status).toBe(200);
  });

  it('compute’s @own resources stay the person’s and the agent’s alike (a sandbox)', async () => {
    const s = await setup('member');
    const identity = (await iam.authenticate(s.agentKey))!;
    const [decision] = await iam.authorize(identity, [
      {
        action: 'compute:sandboxes:delete',
        resource: { type: 'compute-sandbox', id: 'sbx_01', tenantId: s.tenantId, ownerId: s.person.id },
      },
    ]);
    expect(decision?.allowed).toBe(true);
  });
});
