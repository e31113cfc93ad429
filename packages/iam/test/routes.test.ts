import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as OTPAuth from 'otpauth';
import { testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { createIam, type Iam } from '../src/index.js';
import { migratedDatabase, uniqueTenant } from './helpers.js';

const kinds = await testDatabaseKinds();
const ORIGIN = 'http://localhost:3000';

interface Answer {
  status: number;
  body: {
    data?: Record<string, unknown> & { items?: Record<string, unknown>[] };
    error?: { code: string; message: string; details?: Record<string, unknown>; requestId: string };
  };
  headers: Headers;
  text: string;
}

describe.each(kinds)('IAM routes on %s', (kind) => {
  let database: TestDatabase;
  let iam: Iam;
  /** Every answer a test saw, to scan for secrets at the end. */
  const transcript: { path: string; text: string; oneTime: boolean }[] = [];
  const secrets: string[] = [];

  async function call(
    path: string,
    body: unknown,
    headers: Record<string, string> = {},
    oneTime = false,
  ): Promise<Answer> {
    const response = await iam.handler(
      new Request(`${ORIGIN}/api/iam/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      }),
    );
    const text = await response.text();
    transcript.push({ path, text, oneTime });
    return {
      status: response.status,
      body: JSON.parse(text) as Answer['body'],
      headers: response.headers,
      text,
    };
  }
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  let tenantId: string;
  let adminToken: string;
  let memberToken: string;
  let memberId: string;
  let rootToken: string;

  beforeAll(async () => {
    database = await migratedDatabase(kind);
    iam = createIam({ database, trustedOrigins: [ORIGIN] });
    await iam.ready();
    await iam.installActions([{ action: 'compute:reservations:create', summary: 'reserve' }]);
    tenantId = uniqueTenant('r');
    await iam.createTenant({ id: tenantId, name: 'Routes' });
    const admin = await iam.createPerson({
      tenantId,
      email: `admin@${tenantId}.test`,
      password: 'admin password 1',
    });
    const member = await iam.createPerson({
      tenantId,
      email: `member@${tenantId}.test`,
      password: 'member password 1',
    });
    memberId = member.id;
    await iam.createBinding({ tenantId, role: 'tenant-admin', principalId: admin.id });
    await iam.createBinding({ tenantId, role: 'member', principalId: member.id });
    const root = await iam.createPerson({
      tenantId: 'root',
      email: `root-${tenantId}@root.test`,
      password: 'root password 1',
    });
    await iam.createBinding({ tenantId: 'root', role: 'platform-admin', principalId: root.id });
    secrets.push('admin password 1', 'member password 1', 'root password 1');
    const signIn = async (email: string, password: string, tenant: string) => {
      const answer = await call('sessions/signIn', { tenantId: tenant, email, password }, {}, true);
      expect(answer.status).toBe(200);
      const token = answer.body.data!.token as string;
      secrets.push(token);
      return token;
    };
    adminToken = await signIn(`admin@${tenantId}.test`, 'admin password 1', tenantId);
    memberToken = await signIn(`member@${tenantId}.test`, 'member password 1', tenantId);
    rootToken = await signIn(`root-${tenantId}@root.test`, 'root password 1', 'root');
  });
  afterAll(async () => {
    await iam?.close();
    await database?.close();
  });

  it('sign-in returns the token once and sets an HttpOnly cookie (no Secure on localhost)', async () => {
    const answer = await call(
      'sessions/signIn',
      { tenantId, email: `member@${tenantId}.test`, password: 'member password 1' },
      {},
      true,
    );
    const token = answer.body.data!.token as string;
    secrets.push(token);
    expect(token).toMatch(/^biam_ses_/);
    const cookie = answer.headers.get('set-cookie')!;
    expect(cookie).toContain(`better-iam.session=${token}`);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Lax');
    expect(cookie).not.toContain('Secure');
    const session = answer.body.data!.session as Record<string, unknown>;
    expect(Object.keys(session).sort()).toEqual([
      'createdAt',
      'expiresAt',
      'id',
      'lastSeenAt',
      'mfa',
      'principalId',
      'revokedAt',
    ]);
  });

  it('the cookie is Secure on any other host', async () => {
    const response = await iam.handler(
      new Request('https://iam.example.com/api/iam/sessions/signIn', {
        method: 'POST',
        body: JSON.stringify({ tenantId, email: `member@${tenantId}.test`, password: 'member password 1' }),
      }),
    );
    const text = await response.text();
    secrets.push((JSON.parse(text) as { data: { token: string } }).data.token);
    expect(response.headers.get('set-cookie')).toContain('; Secure');
  });

  it('wrong password and unknown email answer the same 401', async () => {
    const wrong = await call('sessions/signIn', {
      tenantId,
      email: `member@${tenantId}.test`,
      password: 'nope nope nope',
    });
    const unknown = await call('sessions/signIn', {
      tenantId,
      email: `ghost@${tenantId}.test`,
      password: 'nope nope nope',
    });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error).toMatchObject({
      code: 'UNAUTHENTICATED',
      message: 'invalid email, password or tenant',
    });
    expect({ ...unknown.body.error, requestId: '' }).toEqual({ ...wrong.body.error, requestId: '' });
  });

  it('the session cookie counts only on POST with X-Better-Compute: 1 from a trusted origin', async () => {
    const cookie = { cookie: `better-iam.session=${memberToken}` };
    // The same refusal, code and words as compute's routes (one request-check step, issue 14).
    const bare = await call('sessions/get', {}, cookie);
    expect(bare.status).toBe(403);
    expect(bare.body.error).toMatchObject({
      code: 'ACCESS_DENIED',
      message: 'a cookie credential needs a POST with X-Better-Compute: 1 from a trusted Origin',
      details: { reason: 'csrf' },
    });
    const wrongOrigin = await call(
      'sessions/get',
      {},
      { ...cookie, 'x-better-compute': '1', origin: 'https://evil.example' },
    );
    expect(wrongOrigin.status).toBe(403);
    const ok = await call('sessions/get', {}, { ...cookie, 'x-better-compute': '1', origin: ORIGIN });
    expect(ok.status).toBe(200);
    expect(ok.body.data).toMatchObject({ identity: { principalId: memberId, credentialKind: 'session' } });
    const bearerOk = await call('sessions/get', {}, bearer(memberToken));
    expect(bearerOk.status).toBe(200);
  });

  it('unknown routes, other verbs and missing credentials', async () => {
    expect((await call('nothing/here', {})).body.error?.code).toBe('NOT_FOUND');
    const get = await iam.handler(new Request(`${ORIGIN}/api/iam/sessions/get`));
    expect(get.status).toBe(404);
    const outside = await iam.handler(
      new Request(`${ORIGIN}/api/compute/system/version`, { method: 'POST' }),
    );
    expect(outside.status).toBe(404);
    const none = await call('tenants/list', {});
    expect(none.status).toBe(401);
    expect(none.body.error?.code).toBe('UNAUTHENTICATED');
    const bogus = await call('tenants/list', {}, bearer('biam_key_' + 'x'.repeat(43)));
    expect(bogus.body.error?.message).toBe('the credential is unknown, expired or revoked');
  });

  it('a body over 64 KiB is refused with 413', async () => {
    const answer = await call('sessions/signIn', {
      tenantId,
      email: 'a@b.c',
      password: 'x'.repeat(70 * 1024),
    });
    expect(answer.status).toBe(413);
    expect(answer.body.error?.code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('invalid JSON and invalid input are INVALID_ARGUMENT, without echoing the input', async () => {
    const response = await iam.handler(
      new Request(`${ORIGIN}/api/iam/sessions/signIn`, { method: 'POST', body: '{not json' }),
    );
    expect(response.status).toBe(400);
    const answer = await call('sessions/signIn', {
      tenantId,
      email: 'not-an-email',
      password: 'hunter2 secret',
    });
    expect(answer.body.error?.code).toBe('INVALID_ARGUMENT');
    expect(answer.text).not.toContain('hunter2 secret');
  });

  it('a member is refused tenant administration; the tenant admin is allowed; neither reaches another tenant', async () => {
    const denied = await call(
      'principals/create',
      { kind: 'service-account', displayName: 'ci' },
      bearer(memberToken),
    );
    expect(denied.status).toBe(403);
    expect(denied.body.error?.code).toBe('ACCESS_DENIED');
    expect(denied.body.error?.details).toMatchObject({ action: 'iam:principals:create' });
    const created = await call(
      'principals/create',
      { kind: 'service-account', displayName: 'ci' },
      bearer(adminToken),
    );
    expect(created.status).toBe(200);
    expect(created.body.data?.id).toMatch(/^sa_/);
    const elsewhere = await call('principals/list', { tenantId: 'root' }, bearer(adminToken));
    expect(elsewhere.status).toBe(403);
    const rootAnywhere = await call('principals/list', { tenantId }, bearer(rootToken));
    expect(rootAnywhere.status).toBe(200);
    expect(rootAnywhere.body.data?.items?.length).toBeGreaterThanOrEqual(3);
  });

  it('API keys: created once with the secret, listed and revoked without it, refused at once', async () => {
    const created = await call('apiKeys/create', { name: 'laptop' }, bearer(memberToken), true);
    expect(created.status).toBe(200);
    const key = created.body.data!.key as string;
    secrets.push(key);
    const keyId = (created.body.data!.apiKey as { id: string }).id;
    expect((await call('sessions/get', {}, bearer(key))).status).toBe(200);
    const list = await call('apiKeys/list', {}, bearer(memberToken));
    expect(list.body.data?.items?.map((item) => item.id)).toContain(keyId);
    // A member manages only its own keys.
    const adminKey = await call('apiKeys/create', { name: 'admin' }, bearer(adminToken), true);
    secrets.push(adminKey.body.data!.key as string);
    const adminKeyId = (adminKey.body.data!.apiKey as { id: string }).id;
    expect((await call('apiKeys/revoke', { apiKeyId: adminKeyId }, bearer(memberToken))).status).toBe(403);
    const revoked = await call('apiKeys/revoke', { apiKeyId: keyId }, bearer(memberToken));
    expect(revoked.status).toBe(200);
    expect(revoked.body.data?.revokedAt).not.toBeNull();
    expect((await call('sessions/get', {}, bearer(key))).status).toBe(401);
  });

  it('tenants: the root admin creates, suspends and reactivates; a suspended tenant gets TENANT_SUSPENDED', async () => {
    const child = uniqueTenant('c');
    const created = await call('tenants/create', { id: child, name: 'Child' }, bearer(rootToken));
    expect(created.body.data).toMatchObject({ id: child, parentId: 'root', state: 'active' });
    const person = await iam.createPerson({
      tenantId: child,
      email: `p@${child}.test`,
      password: 'child password',
    });
    await iam.createBinding({ tenantId: child, role: 'tenant-admin', principalId: person.id });
    const childKey = (await iam.createApiKey(person.id, { name: 'k' })).key;
    secrets.push(childKey);
    // A tenant's own admin cannot suspend it: that is decided in its parent.
    expect((await call('tenants/suspend', { id: child }, bearer(childKey))).status).toBe(403);
    expect((await call('tenants/get', {}, bearer(childKey))).body.data).toMatchObject({ id: child });
    const suspended = await call('tenants/suspend', { id: child }, bearer(rootToken));
    expect(suspended.body.data).toMatchObject({ state: 'suspended', version: 2 });
    const refused = await call('tenants/get', {}, bearer(childKey));
    expect(refused.status).toBe(403);
    expect(refused.body.error?.code).toBe('TENANT_SUSPENDED');
    expect((await call('tenants/reactivate', { id: child }, bearer(rootToken))).body.data).toMatchObject({
      state: 'active',
    });
    expect((await call('tenants/get', {}, bearer(childKey))).status).toBe(200);
    const list = await call('tenants/list', {}, bearer(rootToken));
    expect(list.body.data?.items?.map((t) => t.id)).toContain(child);
  });

  it('roles and bindings over HTTP; a custom role with an unknown action is INVALID_ARGUMENT', async () => {
    const bad = await call(
      'roles/create',
      { name: 'typo', actions: ['compute:reservatons:create'] },
      bearer(adminToken),
    );
    expect(bad.status).toBe(400);
    expect(bad.body.error?.message).toBe('compute:reservatons:create matches no known action');
    const role = await call(
      'roles/create',
      { name: 'reserver', actions: ['compute:reservations:create'] },
      bearer(adminToken),
    );
    expect(role.status).toBe(200);
    const sa = await iam.createServiceAccount({ tenantId, displayName: 'bot' });
    const binding = await call(
      'bindings/create',
      { role: 'reserver', principalId: sa.id },
      bearer(adminToken),
    );
    expect(binding.body.data).toMatchObject({
      roleName: 'reserver',
      principalId: sa.id,
      scope: { type: 'tenant' },
    });
    const saKey = (await iam.createApiKey(sa.id, { name: 'bot' })).key;
    secrets.push(saKey);
    const can = await call(
      'can',
      { checks: [{ action: 'compute:reservations:create', resource: { type: 'compute-reservation' } }] },
      bearer(saKey),
    );
    expect(can.body.data).toMatchObject({ results: [{ allowed: true }] });
    const revoke = await call('bindings/revoke', { bindingId: binding.body.data!.id }, bearer(adminToken));
    expect(revoke.status).toBe(200);
    const after = await call(
      'can/check',
      { checks: [{ action: 'compute:reservations:create', resource: { type: 'compute-reservation' } }] },
      bearer(saKey),
    );
    expect(after.body.data).toMatchObject({ results: [{ allowed: false }] });
    const used = await call('roles/delete', { roleId: role.body.data!.id }, bearer(adminToken));
    expect(used.status).toBe(200);
    const listed = await call('roles/list', {}, bearer(memberToken));
    expect(listed.body.data?.items?.map((r) => r.name)).toEqual(
      expect.arrayContaining(['platform-admin', 'tenant-admin', 'operator', 'member', 'viewer']),
    );
  });

  it('can answers up to 50 checks and refuses 51', async () => {
    const check = { action: 'compute:reservations:create', resource: { type: 'compute-reservation' } };
    const fifty = await call('can', { checks: Array.from({ length: 50 }, () => check) }, bearer(memberToken));
    expect((fifty.body.data?.results as unknown[]).length).toBe(50);
    const many = await call('can', { checks: Array.from({ length: 51 }, () => check) }, bearer(memberToken));
    expect(many.body.error?.code).toBe('INVALID_ARGUMENT');
  });

  it('a binding grants nothing its creator does not hold there, and a refused one writes nothing', async () => {
    const role = await call(
      'roles/create',
      { name: 'binder', actions: ['iam:bindings:create', 'iam:bindings:list', 'iam:roles:list'] },
      bearer(adminToken),
    );
    expect(role.status).toBe(200);
    // The administrator holds every action of tenant-admin in the tenant: it may bind it, and binder.
    const binder = await iam.createPerson({
      tenantId,
      email: `binder@${tenantId}.test`,
      password: 'binder password 1',
    });
    secrets.push('binder password 1');
    const granted = await call(
      'bindings/create',
      { role: 'binder', principalId: binder.id },
      bearer(adminToken),
    );
    expect(granted.status).toBe(200);
    const binderKey = (await iam.createApiKey(binder.id, { name: 'binder' })).key;
    secrets.push(binderKey);
    const before = await iam.listBindings({ tenantId, principalId: binder.id });
    // The binder may create bindings, but not one that makes itself (or anyone) an administrator.
    const escalation = await call(
      'bindings/create',
      { role: 'tenant-admin', principalId: binder.id },
      bearer(binderKey),
    );
    expect(escalation.status).toBe(403);
    expect(escalation.body.error).toMatchObject({
      code: 'ACCESS_DENIED',
      details: { reason: 'escalation', role: 'tenant-admin' },
    });
    expect(escalation.body.error!.message).toMatch(
      /^role tenant-admin grants \d+ actions you do not hold on tenant /,
    );
    expect(escalation.body.error!.details!.missing).toContain('compute:reservations:create');
    expect((await iam.listBindings({ tenantId, principalId: binder.id })).items).toEqual(before.items);
    // What it holds it may pass on, at tenant scope or narrower.
    const sa = await iam.createServiceAccount({ tenantId, displayName: 'helper' });
    const passOn = await call(
      'bindings/create',
      {
        role: 'binder',
        principalId: sa.id,
        scope: { type: 'project', id: 'prj_01jz0000000000000000000000' },
      },
      bearer(binderKey),
    );
    expect(passOn.status).toBe(200);
    // The tenant administrator can make another administrator: compute:fleet:admin, which no tenant
    // binding carries, is not asked of it.
    const second = await call(
      'bindings/create',
      { role: 'tenant-admin', principalId: sa.id },
      bearer(adminToken),
    );
    expect(second.status).toBe(200);
    // And a tenant's administrator binds nothing in root.
    const platform = await call(
      'bindings/create',
      { tenantId: 'root', role: 'operator', principalId: sa.id },
      bearer(adminToken),
    );
    expect(platform.status).toBe(403);
  });

  it('TOTP over HTTP, then jwt.issue and the JWKS route', async () => {
    const person = await iam.createPerson({
      tenantId,
      email: `totp@${tenantId}.test`,
      password: 'totp password 1',
    });
    secrets.push('totp password 1');
    const first = await call(
      'sessions/signIn',
      { tenantId, email: `totp@${tenantId}.test`, password: 'totp password 1' },
      {},
      true,
    );
    const token = first.body.data!.token as string;
    secrets.push(token);
    const enrolled = await call('totp/enroll', {}, bearer(token), true);
    const secret = enrolled.body.data!.secret as string;
    secrets.push(secret);
    const code = () => new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret) }).generate();
    // The recovery codes are secrets shown this once (issue 15).
    expect((await call('totp/confirm', { code: code() }, bearer(token), true)).body.data).toEqual({
      confirmed: true,
      recoveryCodes: expect.arrayContaining([expect.stringMatching(/^[a-z0-9]{5}-[a-z0-9]{5}$/)]),
    });
    const noCode = await call('sessions/signIn', {
      tenantId,
      email: `totp@${tenantId}.test`,
      password: 'totp password 1',
    });
    expect(noCode.body.error).toMatchObject({ code: 'UNAUTHENTICATED', details: { mfaRequired: true } });
    void person;
    const jwt = await call('jwt/issue', {}, bearer(token), true);
    const jwtToken = jwt.body.data!.token as string;
    secrets.push(jwtToken);
    expect((await call('sessions/get', {}, bearer(jwtToken))).body.data).toMatchObject({
      identity: { credentialKind: 'jwt' },
    });
    const jwks = await iam.handler(new Request(`${ORIGIN}/api/iam/jwks`));
    const body = (await jwks.json()) as { keys: Record<string, unknown>[] };
    expect(body.keys[0]).toMatchObject({ kty: 'OKP', alg: 'EdDSA', use: 'sig' });
    expect(body.keys[0]).not.toHaveProperty('d');
    const out = await call('sessions/signOut', {}, bearer(token));
    expect(out.body.data).toEqual({ revoked: true });
    expect(out.headers.get('set-cookie')).toContain('Max-Age=0');
    expect((await call('sessions/get', {}, bearer(token))).status).toBe(401);
    expect((await call('sessions/get', {}, bearer(jwtToken))).status).toBe(401);
  });

  it('no answer or error carries a password, key or token, except the one-time creation answer', () => {
    expect(transcript.length).toBeGreaterThan(20);
    expect(secrets.length).toBeGreaterThan(8);
    for (const entry of transcript) {
      for (const secret of secrets) {
        if (entry.oneTime && entry.text.includes(secret)) continue;
        expect(entry.text.includes(secret), `${entry.path} leaked a secret`).toBe(false);
      }
      expect(entry.text).not.toMatch(/token_hash|password_hash|scrypt\$/);
    }
  });
});
