/**
 * Delegated confirmation through the real binary against a real server (issue 36 item 2): the
 * agent's `reserve` above its delegation's spend limit answers CONFIRMATION_REQUIRED naming the
 * confirmation; the person reads it with `confirmations list` and `approve` (which stops after the
 * summary without --yes, and is refused without a second factor); the agent's `reserve` with the
 * same --key then runs once and, run again, answers the same reservation; a declined one never runs.
 */
import * as OTPAuth from 'otpauth';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import {
  callServer,
  failureCode,
  runBinary,
  scratchDirectory,
  serveLive,
  type LiveServer,
} from './cli-support.js';
import { agentWithKey } from './iam-support.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 180_000 });

const scratch = scratchDirectory('.bc-confirmations-');
const PASSWORD = 'correct horse battery';

let database: TestDatabase;
let compute: ComputeInstance;
let url = '';
let server: LiveServer;
let poolId = '';
const tokens = { agent: '', personKey: '', personMfa: '' };

/** The real binary, in tenant acme, with the token given. */
const run = (args: string[], token: string) =>
  runBinary(args, scratch, {
    BETTER_COMPUTE_URL: url,
    BETTER_COMPUTE_TOKEN: token,
    BETTER_COMPUTE_TENANT: 'acme',
  });
const codeOf = failureCode;
const reserve = (key: string) =>
  run(
    [
      'reserve',
      '--pool',
      poolId,
      '--gpus',
      '8',
      '--for',
      '1h',
      '--key',
      key,
      '--wait',
      '0',
      '--format',
      'compact',
    ],
    tokens.agent,
  );

beforeAll(async () => {
  database = await createTestDatabase('pglite');
  compute = await betterCompute({ database, trustedOrigins: [], rateLimit: false }, { log: () => {} });
  await compute.migrate();
  const iam = compute.embeddedIam!;
  const rootKey = (await iam.bootstrapDev())!.rootAdmin.apiKey;
  const person = await iam.createPerson({ tenantId: 'acme', email: 'pat@acme.test', password: PASSWORD });
  await iam.createBinding({ tenantId: 'acme', role: 'member', principalId: person.id });
  tokens.personKey = (await iam.createApiKey(person.id, { name: 'laptop' })).key;
  const { secret } = await iam.enrollTotp(person.id);
  const totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret) });
  await iam.confirmTotp(person.id, totp.generate());
  tokens.personMfa = (
    await iam.signIn('pat@acme.test', PASSWORD, 'acme', totp.generate({ timestamp: Date.now() + 30_000 }))
  ).token;
  tokens.agent = (
    await agentWithKey(iam, {
      tenantId: 'acme',
      displayName: 'pat’s agent',
      actingFor: person.id,
      spendLimitGpuHours: 4,
      role: 'member',
    })
  ).key;

  server = await serveLive(compute);
  url = server.url;
  const api = <T = any>(method: string, body: Record<string, unknown>) =>
    callServer<T>(url, method, body, rootKey);
  const site = await api('sites.create', { name: 'confirm' });
  poolId = (await api('pools.create', { siteId: site.id, name: 'confirm', class: 'gpu' })).id;
  await api('pools.offer', { poolId, offerTenantId: 'acme' });
  // One machine of 8 GPUs joins through the real flow.
  const { token } = await api('joinTokens.create', { poolId, preApproved: true });
  const publicCall = async (method: string, body: Record<string, unknown>) => {
    const response = await fetch(`${url}/api/compute/nodes/${method}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return ((await response.json()) as { data: any }).data;
  };
  const gpus = Array.from({ length: 8 }, (_, index) => ({
    index,
    model: 'H100',
    product: 'H100-SXM5-80GB',
    vramGiB: 80,
  }));
  const joined = await publicCall('join', {
    joinToken: token,
    hostname: 'gpu-0',
    inventory: { cpuCores: 64, memoryGiB: 512, gpus },
  });
  await publicCall('heartbeat', { nodeCredential: joined.nodeCredential });
});

afterAll(async () => {
  await server.close();
  await compute?.close();
  await database?.close();
});

describe('confirmations through the binary', () => {
  it('the person approves what the agent asked for; the agent’s retry with the same --key runs once', async () => {
    const asked = await reserve('cli-big-1');
    expect(asked.status).not.toBe(0);
    expect(codeOf(asked)).toBe('CONFIRMATION_REQUIRED');
    const confirmationId = /better-compute confirmations approve (cfm_[0-9a-z]+)/.exec(asked.stderr)?.[1];
    expect(confirmationId, asked.stderr).toBeDefined();

    const listed = await run(['confirmations', 'list', '--format', 'compact'], tokens.personKey);
    expect(listed.status, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout).items).toEqual([
      expect.objectContaining({ id: confirmationId, state: 'pending', method: 'reservations.create' }),
    ]);

    // Without --yes: the summary, then a stop.
    const reviewed = await run(['confirmations', 'approve', confirmationId!], tokens.personMfa);
    expect(reviewed.status).toBe(1);
    expect(reviewed.stderr).toContain(`Confirmation ${confirmationId} (pending`);
    expect(reviewed.stderr).toContain(`reservations.create {"durationSeconds":3600,"gpus":8`);
    expect(reviewed.stderr).not.toContain('cli-big-1');
    expect(reviewed.stderr).toContain('Not approved. Re-run with --yes');
    // With an API key, no second factor: refused.
    const keyOnly = await run(['confirmations', 'approve', confirmationId!, '--yes'], tokens.personKey);
    expect(codeOf(keyOnly)).toBe('ACCESS_DENIED');
    expect(keyOnly.stderr).toContain('second factor');
    // The agent cannot approve its own.
    expect(codeOf(await run(['confirmations', 'approve', confirmationId!, '--yes'], tokens.agent))).toBe(
      'ACCESS_DENIED',
    );

    const approved = await run(
      ['confirmations', 'approve', confirmationId!, '--yes', '--format', 'compact'],
      tokens.personMfa,
    );
    expect(approved.status, approved.stderr).toBe(0);
    expect(JSON.parse(approved.stdout)).toMatchObject({ id: confirmationId, state: 'approved' });

    const ran = await reserve('cli-big-1');
    expect(ran.status, ran.stderr).toBe(0);
    const reservation = JSON.parse(ran.stdout);
    expect(reservation).toMatchObject({ gpus: 8, poolId });
    const replayed = await reserve('cli-big-1');
    expect(replayed.status, replayed.stderr).toBe(0);
    expect(JSON.parse(replayed.stdout).id).toBe(reservation.id);

    const shown = await run(
      ['confirmations', 'get', confirmationId!, '--format', 'compact'],
      tokens.personKey,
    );
    expect(JSON.parse(shown.stdout)).toMatchObject({ state: 'consumed' });
  });

  it('a declined confirmation never runs', async () => {
    const asked = await reserve('cli-big-2');
    const confirmationId = /better-compute confirmations approve (cfm_[0-9a-z]+)/.exec(asked.stderr)![1]!;
    const declined = await run(['confirmations', 'decline', confirmationId], tokens.personMfa);
    expect(declined.status, declined.stderr).toBe(0);
    expect(declined.stderr).toContain(`Declined: ${confirmationId} never runs.`);
    const retry = await reserve('cli-big-2');
    expect(codeOf(retry)).toBe('ACCESS_DENIED');
    const listed = await run(
      ['confirmations', 'list', '--state', 'declined', '--format', 'compact'],
      tokens.personKey,
    );
    expect(JSON.parse(listed.stdout).items.map((c: any) => c.id)).toEqual([confirmationId]);
  });
});
