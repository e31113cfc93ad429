/**
 * Delegated confirmation (issue 36 item 2), through the real node server with the real embedded
 * Better IAM: an agent reserves within its delegation; a call its delegation holds (a destructive
 * archive, a reservation above its spend limit) answers CONFIRMATION_REQUIRED with the
 * confirmation; only its person approves, from a session opened with a second factor; the retry
 * runs once, and an idempotent one replays after; declined, expired and revoked confirmations never
 * run; another tenant sees nothing; revoking the delegation ends the agent's credential, its
 * pending confirmations and its live stream; every agent call's audit entry names its delegation.
 */
import * as OTPAuth from 'otpauth';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { testDatabaseKinds } from '@better-compute/db/testing';
import { type LiveDeployment, liveDeployment, openStream } from './watch-support.js';
import { agentWithKey } from './iam-support.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 180_000 });

const kinds = await testDatabaseKinds();
const PASSWORD = 'correct horse battery';

describe.each(kinds)('delegated confirmation on %s', (kind) => {
  let d: LiveDeployment;
  const keys = {} as Record<
    'alice' | 'aliceMfa' | 'admin' | 'adminMfa' | 'bob' | 'agent' | 'globexMfa',
    string
  >;
  const ids = {} as Record<'alice' | 'agent', string>;
  let poolId: string;
  let delegationId: string;

  const call = (path: string, body: Record<string, unknown>, token: string) =>
    d.call(path, { tenantId: 'acme', ...body }, token);
  const iamCall = async (path: string, body: Record<string, unknown>, token: string) => {
    const response = await fetch(`${d.url}/api/iam/${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, ...((await response.json()) as { data?: any; error?: any }) };
  };

  /** A person with a confirmed TOTP factor and a session opened with it. */
  async function mfaSession(tenantId: string, email: string, principalId: string): Promise<string> {
    const iam = d.compute.embeddedIam!;
    const { secret } = await iam.enrollTotp(principalId);
    const totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret) });
    await iam.confirmTotp(principalId, totp.generate());
    const signed = await iam.signIn(
      email,
      PASSWORD,
      tenantId,
      totp.generate({ timestamp: Date.now() + 30_000 }),
    );
    expect(signed.session.mfa).toBe(true);
    return signed.token;
  }

  const project = async (name: string) =>
    (await call('projects/create', { name: `${name}-${Math.random().toString(36).slice(2, 8)}` }, keys.alice))
      .data;
  const projectState = async (projectId: string) =>
    (await call('projects/get', { projectId }, keys.alice)).data.state;
  /** The agent's archive of a project: held for alice; the confirmation it answered. */
  async function heldArchive(projectId: string) {
    const answer = await call('projects/archive', { projectId }, keys.agent);
    expect(answer.status).toBe(403);
    expect(answer.error.code).toBe('CONFIRMATION_REQUIRED');
    return answer.error;
  }

  beforeAll(async () => {
    d = await liveDeployment(kind, { reauthorizeMs: 60_000 });
    const iam = d.compute.embeddedIam!;
    const person = async (tenantId: string, email: string, role: string) => {
      const p = await iam.createPerson({ tenantId, email, password: PASSWORD });
      await iam.createBinding({ tenantId, role, principalId: p.id });
      return p;
    };
    const alice = await person('acme', 'alice@acme.test', 'tenant-admin');
    const admin = await person('acme', 'admin2@acme.test', 'tenant-admin');
    const bob = await person('acme', 'bob@acme.test', 'member');
    ids.alice = alice.id;
    keys.alice = (await iam.createApiKey(alice.id, { name: 'laptop' })).key;
    keys.admin = (await iam.createApiKey(admin.id, { name: 'laptop' })).key;
    keys.bob = (await iam.createApiKey(bob.id, { name: 'laptop' })).key;
    keys.aliceMfa = await mfaSession('acme', 'alice@acme.test', alice.id);
    keys.adminMfa = await mfaSession('acme', 'admin2@acme.test', admin.id);
    await iam.createTenant({ id: 'globex', name: 'Globex' });
    const globex = await person('globex', 'eve@globex.test', 'tenant-admin');
    keys.globexMfa = await mfaSession('globex', 'eve@globex.test', globex.id);
    // Alice's agent: as strong as she is, but its destructive calls and big reservations wait for her.
    const agent = await agentWithKey(iam, {
      tenantId: 'acme',
      displayName: 'alice’s agent',
      actingFor: alice.id,
      spendLimitGpuHours: 4,
      role: 'tenant-admin',
    });
    ids.agent = agent.id;
    keys.agent = agent.key;
    delegationId = (await iam.authenticate(keys.agent))!.delegation!.id;

    const root = (path: string, body: Record<string, unknown>) =>
      d.call(path, { tenantId: 'root', ...body }, d.keys.root);
    const site = await root('sites/create', { name: 'confirm', region: 'r' });
    poolId = (await root('pools/create', { siteId: site.data.id, name: 'confirm', class: 'gpu' })).data.id;
    await root('pools/offer', { poolId, offerTenantId: 'acme' });
    const token = (await root('joinTokens/create', { poolId, preApproved: true })).data.token;
    const gpus = Array.from({ length: 8 }, (_, index) => ({
      index,
      model: 'H100',
      product: 'H100-SXM5-80GB',
      vramGiB: 80,
    }));
    const publicCall = async (path: string, body: Record<string, unknown>) => {
      const response = await fetch(`${d.url}/api/compute/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return ((await response.json()) as { data: any }).data;
    };
    const joined = await publicCall('nodes/join', {
      joinToken: token,
      hostname: 'gpu-0',
      inventory: { cpuCores: 64, memoryGiB: 512, gpus },
    });
    await publicCall('nodes/heartbeat', { nodeCredential: joined.nodeCredential });
  });

  afterAll(async () => {
    await d?.close();
  });

  it('an agent reserves within its delegation, audited with the delegation', async () => {
    const small = await call('reservations/create', { poolId, gpus: 1, durationSeconds: 3600 }, keys.agent);
    expect(small.error).toBeUndefined();
    expect(small.data).toMatchObject({ ownerId: ids.alice, agentId: ids.agent });
    const { rows } = await sql<{ actor_kind: string; outcome: string }>`
      select actor_kind, outcome from compute.audit_events
       where actor = ${ids.agent} and method = 'reservations.create'`.execute(d.database.db);
    expect(rows).toEqual([{ actor_kind: `agent/${delegationId}`, outcome: 'allowed' }]);
  });

  it('a destructive call answers CONFIRMATION_REQUIRED with the confirmation, and runs nothing', async () => {
    const { id: projectId } = await project('held');
    const error = await heldArchive(projectId);
    expect(error.details).toEqual({
      confirmationId: expect.stringMatching(/^cfm_/),
      summary: `projects.archive {"projectId":"${projectId}","tenantId":"acme"}`,
      expiresAt: expect.any(String),
      reason: 'compute:projects:archive matches the delegation’s confirm pattern compute:*:archive',
    });
    expect(error.hint).toContain(`better-compute confirmations approve ${error.details.confirmationId}`);
    expect(error.hint).toContain('same idempotency key');
    // Asking again reuses the pending confirmation; nothing ran.
    expect((await heldArchive(projectId)).details.confirmationId).toBe(error.details.confirmationId);
    expect(await projectState(projectId)).toBe('active');
    // The person sees it, with what would run; the request was audited as failed, with the delegation.
    const listed = await call('confirmations/list', { state: 'pending' }, keys.alice);
    expect(listed.data.items.map((c: any) => c.id)).toContain(error.details.confirmationId);
    const { rows } = await sql<{ actor_kind: string; error_code: string }>`
      select actor_kind, error_code from compute.audit_events
       where actor = ${ids.agent} and method = 'projects.archive'`.execute(d.database.db);
    expect(rows[0]).toEqual({ actor_kind: `agent/${delegationId}`, error_code: 'CONFIRMATION_REQUIRED' });
  });

  it('only the person approves, and only with a second factor; the retry then runs once', async () => {
    const { id: projectId } = await project('approve');
    const { confirmationId } = (await heldArchive(projectId)).details;
    const refusals = [
      [keys.alice, 'second-factor-required'],
      [keys.agent, 'agent-cannot-confirm'],
      [keys.adminMfa, 'not-the-person'],
    ] as const;
    for (const [token, reason] of refusals) {
      const answer = await call('confirmations/approve', { confirmationId }, token);
      expect(answer.error).toMatchObject({ code: 'ACCESS_DENIED', details: { reason } });
    }
    // A colleague without an administrator's role is not even shown it.
    expect((await call('confirmations/approve', { confirmationId }, keys.bob)).error.code).toBe(
      'ACCESS_DENIED',
    );
    expect((await call('confirmations/get', { confirmationId }, keys.bob)).error.code).toBe('ACCESS_DENIED');

    const approved = await call('confirmations/approve', { confirmationId }, keys.aliceMfa);
    expect(approved.data).toMatchObject({ id: confirmationId, state: 'approved', decidedBy: ids.alice });
    expect(Date.parse(approved.data.expiresAt) - Date.now()).toBeGreaterThan(14 * 60_000);

    const ran = await call('projects/archive', { projectId }, keys.agent);
    expect(ran.error).toBeUndefined();
    expect(ran.data.state).toBe('archived');
    const consumed = await call('confirmations/get', { confirmationId }, keys.alice);
    expect(consumed.data).toMatchObject({ state: 'consumed', consumedAt: expect.any(String) });
    // archive keeps no answer: running it again needs a new confirmation.
    const again = await call('projects/archive', { projectId }, keys.agent);
    expect(again.error.code).toBe('CONFIRMATION_REQUIRED');
    expect(again.error.details.confirmationId).not.toBe(confirmationId);
    // Each step wrote its event, about the confirmation, with who asked for whom.
    const events = await call('events/list', { type: 'confirmation.', limit: 500 }, keys.alice);
    const steps = events.data.items.filter((e: any) => e.subject.id === confirmationId);
    expect(steps.map((e: any) => e.type).sort()).toEqual([
      'confirmation.approved',
      'confirmation.consumed',
      'confirmation.requested',
    ]);
    expect(steps[0].data).toMatchObject({ agentId: ids.agent, personId: ids.alice, delegationId });
  });

  it('a reservation above the spend limit waits; the retry with the same key runs once, and replays', async () => {
    const body = { poolId, gpus: 8, durationSeconds: 3600, idempotencyKey: 'big-run-1' };
    const held = await call('reservations/create', body, keys.agent);
    expect(held.error).toMatchObject({ code: 'CONFIRMATION_REQUIRED' });
    expect(held.error.details.reason).toMatch(/8 GPU-hours, above the delegation’s limit of 4/);
    expect(held.error.details.summary).not.toContain('big-run-1');
    const { confirmationId } = held.error.details;
    await call('confirmations/approve', { confirmationId }, keys.aliceMfa);
    const first = await call('reservations/create', body, keys.agent);
    expect(first.error).toBeUndefined();
    const response = await fetch(`${d.url}/api/compute/reservations/create`, {
      method: 'POST',
      headers: { authorization: `Bearer ${keys.agent}`, 'content-type': 'application/json' },
      body: JSON.stringify({ tenantId: 'acme', ...body }),
    });
    expect(response.headers.get('idempotent-replayed')).toBe('true');
    expect(((await response.json()) as any).data.id).toBe(first.data.id);
    const mine = await call('reservations/list', { poolId, limit: 500 }, keys.alice);
    expect(mine.data.items.filter((r: any) => r.gpus === 8)).toHaveLength(1);
    // Another key is another call: it asks again.
    const other = await call('reservations/create', { ...body, idempotencyKey: 'big-run-2' }, keys.agent);
    expect(other.error.code).toBe('CONFIRMATION_REQUIRED');
    expect(other.error.details.confirmationId).not.toBe(confirmationId);
  });

  it('a declined confirmation never runs; an administrator may decline but not approve', async () => {
    const { id: projectId } = await project('decline');
    const { confirmationId } = (await heldArchive(projectId)).details;
    expect((await call('confirmations/decline', { confirmationId }, keys.agent)).error.code).toBe(
      'ACCESS_DENIED',
    );
    const declined = await call('confirmations/decline', { confirmationId }, keys.adminMfa);
    expect(declined.data).toMatchObject({ state: 'declined' });
    const retry = await call('projects/archive', { projectId }, keys.agent);
    expect(retry.error).toMatchObject({
      code: 'ACCESS_DENIED',
      details: { reason: 'confirmation-declined', confirmationId },
    });
    expect((await call('confirmations/approve', { confirmationId }, keys.aliceMfa)).error.code).toBe(
      'INVALID_STATE',
    );
    expect(await projectState(projectId)).toBe('active');
  });

  it('an expired confirmation never runs, pending or approved past its window', async () => {
    const { id: projectId } = await project('expire');
    const pending = (await heldArchive(projectId)).details.confirmationId;
    await sql`update compute.confirmations set expires_at = now() - interval '1 second' where id = ${pending}`.execute(
      d.database.db,
    );
    expect(
      (await call('confirmations/approve', { confirmationId: pending }, keys.aliceMfa)).error,
    ).toMatchObject({
      code: 'INVALID_STATE',
      details: { state: 'expired' },
    });
    const fresh = (await heldArchive(projectId)).details.confirmationId;
    expect(fresh).not.toBe(pending);
    await call('confirmations/approve', { confirmationId: fresh }, keys.aliceMfa);
    await sql`update compute.confirmations set expires_at = now() - interval '1 second' where id = ${fresh}`.execute(
      d.database.db,
    );
    const late = await heldArchive(projectId);
    expect(late.details.confirmationId).not.toBe(fresh);
    expect(await projectState(projectId)).toBe('active');
    expect((await call('confirmations/get', { confirmationId: fresh }, keys.alice)).data.state).toBe(
      'expired',
    );
  });

  it('another tenant’s person neither sees nor approves a confirmation', async () => {
    const { id: projectId } = await project('foreign');
    const { confirmationId } = (await heldArchive(projectId)).details;
    for (const path of ['confirmations/get', 'confirmations/approve', 'confirmations/decline']) {
      const asAcme = await call(path, { confirmationId }, keys.globexMfa);
      expect(asAcme.status).toBe(403);
      const asGlobex = await d.call(path, { tenantId: 'globex', confirmationId }, keys.globexMfa);
      expect(asGlobex.error.code).toBe('NOT_FOUND');
    }
    const list = await d.call('confirmations/list', { tenantId: 'globex', scope: 'all' }, keys.globexMfa);
    expect(list.data.items).toEqual([]);
    expect((await call('confirmations/get', { confirmationId }, keys.alice)).data.state).toBe('pending');
  });

  it('an agent cannot create or change a delegation, through the API’s origin', async () => {
    for (const [path, body] of [
      ['delegations/create', { tenantId: 'acme', agentId: ids.agent, confirm: [] }],
      ['delegations/revoke', { tenantId: 'acme', delegationId }],
    ] as const) {
      const answer = await iamCall(path, body, keys.agent);
      expect(answer.status).toBe(403);
    }
    expect((await d.compute.embeddedIam!.authenticate(keys.agent))!.delegation!.id).toBe(delegationId);
  });

  it('suspending the agent ends its credential and its pending confirmations', async () => {
    const { id: projectId } = await project('suspend');
    const { confirmationId } = (await heldArchive(projectId)).details;
    const disabled = await iamCall(
      'principals/disable',
      { tenantId: 'acme', principalId: ids.agent },
      keys.alice,
    );
    expect(disabled.data).toMatchObject({ disabled: true });
    expect((await call('projects/archive', { projectId }, keys.agent)).status).toBe(401);
    expect((await call('confirmations/get', { confirmationId }, keys.alice)).data.state).toBe('revoked');
    await iamCall('principals/enable', { tenantId: 'acme', principalId: ids.agent }, keys.alice);
    // Back, under the same delegation: the ended confirmation stays ended, and the call asks anew.
    const again = await heldArchive(projectId);
    expect(again.details.confirmationId).not.toBe(confirmationId);
  });

  it('revoking the delegation ends the agent’s credential, its pending confirmations and its stream', async () => {
    const { id: projectId } = await project('revoke');
    const { confirmationId } = (await heldArchive(projectId)).details;
    const stream = await openStream(`${d.url}/api/compute/watch?tenantId=acme`, {
      authorization: `Bearer ${keys.agent}`,
    });
    expect(stream.status).toBe(200);
    const revokedAt = Date.now();
    const revoked = await iamCall('delegations/revoke', { tenantId: 'acme', delegationId }, keys.aliceMfa);
    expect(revoked.data).toMatchObject({ id: delegationId, state: 'revoked' });
    await stream.ended;
    expect(Date.now() - revokedAt).toBeLessThan(3000);
    const last = stream.frames.at(-1)!;
    expect(JSON.parse(last.data!).error.code).toBe('UNAUTHENTICATED');
    expect((await call('projects/archive', { projectId }, keys.agent)).status).toBe(401);
    const ended = await call('confirmations/get', { confirmationId }, keys.alice);
    expect(ended.data.state).toBe('revoked');
    expect((await call('confirmations/approve', { confirmationId }, keys.aliceMfa)).error.code).toBe(
      'INVALID_STATE',
    );
    expect(await projectState(projectId)).toBe('active');
  });
});
