/**
 * Second factors and recovery (issue 15), through IAM's routes: recovery codes at enrolment, shown
 * once and kept hashed, each good for one sign-in; a person removes their own factor with a code; an
 * administrator removes a lost one; a person changes their password (their other sessions end); an
 * administrator gives a one-time password (every session ends).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as OTPAuth from 'otpauth';
import { testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { createIam, type Iam } from '../src/index.js';
import { migratedDatabase, testClock, type TestClock, uniqueTenant } from './helpers.js';

const kinds = await testDatabaseKinds();
const ORIGIN = 'http://localhost:3000';

describe.each(kinds)('second factors and recovery on %s', (kind) => {
  let database: TestDatabase;
  let clock: TestClock;
  let iam: Iam;

  beforeAll(async () => {
    database = await migratedDatabase(kind);
    clock = testClock();
    iam = createIam({ database, clock: clock.now });
    await iam.ready();
  });
  afterAll(async () => {
    await iam?.close();
    await database?.close();
  });

  async function call(path: string, body: unknown, token?: string) {
    const response = await iam.handler(
      new Request(`${ORIGIN}/api/iam/${path}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: JSON.stringify(body),
      }),
    );
    return { status: response.status, ...((await response.json()) as { data?: any; error?: any }) };
  }

  /** A tenant with an administrator and a person who signed in; the person's session token. */
  async function setup() {
    const tenantId = uniqueTenant();
    await iam.createTenant({ id: tenantId, name: 'Recovery' });
    const admin = await iam.createPerson({
      tenantId,
      email: `admin@${tenantId}.test`,
      password: 'admin password 1',
    });
    await iam.createBinding({ tenantId, role: 'tenant-admin', principalId: admin.id });
    const email = `p@${tenantId}.test`;
    const person = await iam.createPerson({ tenantId, email, password: 'first password 1' });
    await iam.createBinding({ tenantId, role: 'member', principalId: person.id });
    const signIn = (password: string, totp?: string) =>
      call('sessions/signIn', { tenantId, email, password, ...(totp ? { totp } : {}) });
    const session = (await signIn('first password 1')).data.token as string;
    const adminKey = (await iam.createApiKey(admin.id, { name: 'admin' })).key;
    const memberKey = (await iam.createApiKey(person.id, { name: 'member' })).key;
    return { tenantId, person, session, signIn, adminKey, memberKey };
  }

  /** Enrols and confirms TOTP from the session; the secret and the recovery codes. */
  async function enrol(session: string) {
    const { secret } = (await call('totp/enroll', {}, session)).data;
    const code = (at = clock.now()) =>
      new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret), digits: 6, period: 30 }).generate({
        timestamp: at.getTime(),
      });
    const confirmed = await call('totp/confirm', { code: code() }, session);
    expect(confirmed.data.confirmed).toBe(true);
    return { code, recoveryCodes: confirmed.data.recoveryCodes as string[] };
  }

  it('confirming gives ten recovery codes, kept only as hashes; each signs in once', async () => {
    const s = await setup();
    const { recoveryCodes } = await enrol(s.session);
    expect(recoveryCodes).toHaveLength(10);
    for (const code of recoveryCodes) expect(code).toMatch(/^[a-z0-9]{5}-[a-z0-9]{5}$/);
    expect(new Set(recoveryCodes).size).toBe(10);
    const stored = await database.db
      .selectFrom('iam.recovery_codes' as never)
      .selectAll()
      .execute();
    expect(JSON.stringify(stored)).not.toContain(recoveryCodes[0]);

    const first = await s.signIn('first password 1', recoveryCodes[0]);
    expect(first.status).toBe(200);
    expect(first.data.session.mfa).toBe(true);
    const again = await s.signIn('first password 1', recoveryCodes[0]);
    expect(again.error).toMatchObject({ code: 'UNAUTHENTICATED', message: 'invalid TOTP code' });
  });

  it('a person removes their own factor with a current code, never without one', async () => {
    const s = await setup();
    const { code } = await enrol(s.session);
    clock.advance(60_000);
    const wrong = await call('totp/remove', { code: '000000' }, s.session);
    expect(wrong.error).toMatchObject({ code: 'INVALID_ARGUMENT', details: { field: 'code' } });
    // Not with an API key: the factor is the person's, set up and removed from their password session.
    expect((await call('totp/remove', { code: code() }, s.memberKey)).status).toBe(403);
    expect((await call('totp/remove', { code: code() }, s.session)).data).toEqual({ removed: true });
    expect((await s.signIn('first password 1')).status).toBe(200);
  });

  it('an administrator removes a lost factor; a member may not remove another’s', async () => {
    const s = await setup();
    await enrol(s.session);
    expect(
      (await call('totp/reset', { tenantId: s.tenantId, principalId: s.person.id }, s.memberKey)).status,
    ).toBe(403);
    expect(
      (await call('totp/reset', { tenantId: s.tenantId, principalId: s.person.id }, s.adminKey)).data,
    ).toEqual({
      removed: true,
    });
    expect((await s.signIn('first password 1')).status).toBe(200);
    // Audited: who removed whose factor, in which request; the refused attempt left nothing.
    expect(await iam.listRecoveryAudit(s.tenantId)).toEqual([
      expect.objectContaining({
        action: 'totp.reset',
        principalId: s.person.id,
        actor: expect.stringMatching(/^usr_/),
      }),
    ]);
  });

  it('a password change needs the current password and ends the person’s other sessions', async () => {
    const s = await setup();
    const other = (await s.signIn('first password 1')).data.token as string;
    const wrong = await call(
      'passwords/change',
      { currentPassword: 'nope', newPassword: 'second password 2' },
      s.session,
    );
    expect(wrong.error).toMatchObject({ code: 'UNAUTHENTICATED', details: { field: 'currentPassword' } });
    const changed = await call(
      'passwords/change',
      { currentPassword: 'first password 1', newPassword: 'second password 2' },
      s.session,
    );
    expect(changed.data).toEqual({ changed: true, sessionsEnded: 1 });
    expect(await iam.authenticate(other)).toBeNull();
    expect(await iam.authenticate(s.session)).not.toBeNull();
    expect((await s.signIn('first password 1')).status).toBe(401);
    expect((await s.signIn('second password 2')).status).toBe(200);
  });

  it('an administrator gives a one-time password, shown once; every session of the person ends', async () => {
    const s = await setup();
    expect(
      (await call('passwords/reset', { tenantId: s.tenantId, principalId: s.person.id }, s.memberKey)).status,
    ).toBe(403);
    const reset = await call(
      'passwords/reset',
      { tenantId: s.tenantId, principalId: s.person.id },
      s.adminKey,
    );
    expect(reset.data.sessionsEnded).toBeGreaterThanOrEqual(1);
    expect(await iam.authenticate(s.session)).toBeNull();
    const signedIn = await s.signIn(reset.data.oneTimePassword);
    expect(signedIn.status).toBe(200);
    expect((await iam.listRecoveryAudit(s.tenantId)).map((entry) => entry.action)).toEqual([
      'passwords.reset',
    ]);
    // The person then sets their own.
    const changed = await call(
      'passwords/change',
      { currentPassword: reset.data.oneTimePassword, newPassword: 'my own password 3' },
      signedIn.data.token,
    );
    expect(changed.data.changed).toBe(true);
  });
});

describe.each(kinds)('TOTP seeds sealed at rest on %s', (kind) => {
  let database: TestDatabase;
  let iam: Iam;

  beforeAll(async () => {
    database = await migratedDatabase(kind);
    iam = createIam({ database, secret: 'a deployment secret for this test only' });
    await iam.ready();
  });
  afterAll(async () => {
    await iam?.close();
    await database?.close();
  });

  it('the stored seed is sealed, bound to its person, and opens only under the deployment’s secret', async () => {
    expect(iam.secretsSealed()).toBe(true);
    const tenantId = uniqueTenant();
    await iam.createTenant({ id: tenantId, name: 'Sealed' });
    const people = await Promise.all(
      ['a', 'b'].map((n) =>
        iam.createPerson({ tenantId, email: `${n}@${tenantId}.test`, password: 'sealed password 1' }),
      ),
    );
    const seeds = await Promise.all(people.map((p) => iam.enrollTotp(p.id)));
    const code = (secret: string) =>
      new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret), digits: 6, period: 30 }).generate();
    const rows = (await database.db
      .selectFrom('iam.totp' as never)
      .select(['principal_id' as never, 'secret' as never])
      .execute()) as { principal_id: string; secret: string }[];
    const stored = rows.find((r) => r.principal_id === people[0]!.id)!.secret;
    expect(stored).toMatch(/^v1\./);
    expect(stored).not.toContain(seeds[0]!.secret);
    expect((await iam.confirmTotp(people[0]!.id, code(seeds[0]!.secret))).confirmed).toBe(true);

    // A's sealed seed copied onto B's row does not open: the owner is bound in.
    await database.db
      .updateTable('iam.totp' as never)
      .set({ secret: stored } as never)
      .where('principal_id' as never, '=', people[1]!.id as never)
      .execute();
    await expect(iam.confirmTotp(people[1]!.id, code(seeds[0]!.secret))).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
    });

    // Another deployment secret cannot open it either.
    const other = createIam({ database, secret: 'another secret' });
    await expect(
      other.signIn(`a@${tenantId}.test`, 'sealed password 1', tenantId, code(seeds[0]!.secret)),
    ).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
    });
    await other.close();
  });
});
