/**
 * Webhooks end to end through the real handler, the real delivery loops and a real HTTP receiver
 * on loopback: every delivery verified with the `standardwebhooks` library; retries, redirects,
 * timeouts, disabling, rotation, ping, redeliver; the address rules at create and at delivery;
 * secrets shown once; another tenant sees nothing.
 */
import { classifyHost } from '@better-compute/core';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { lookup } from 'node:dns/promises';
import { eventTypes } from '@better-compute/events';
import { sql } from 'kysely';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { checkEndpoint, deliveryAddress } from '../src/modules/webhooks/address-check.js';
import { pruneDeliveries } from '../src/modules/webhooks/controller.js';
import { sendAttempt } from '../src/modules/webhooks/sender.js';
import { webhookRuntime } from '../src/modules/webhooks/settings.js';
import { signPayload } from '../src/modules/webhooks/signing.js';
import { call, TestBridge } from './support.js';
import { type Receiver, startReceiver } from './webhook-receiver.js';

const kinds = await testDatabaseKinds();
const ACME = 't-acme-admin';
const GLOBEX = 't-globex-admin';
const ROOT = 't-root-admin';
const MAX_PER_TENANT = 4;

/** Names the tests resolve themselves: a DNS answer an attacker could give. */
async function testLookup(hostname: string) {
  if (hostname === 'private.evil.test') return [{ address: '10.1.2.3', family: 4 as const }];
  if (hostname === 'metadata.evil.test') return [{ address: '169.254.169.254', family: 4 as const }];
  if (hostname === 'mixed.evil.test')
    return [
      { address: '93.184.216.34', family: 4 as const },
      { address: '192.168.1.1', family: 4 as const },
    ];
  const answers = await lookup(hostname, { all: true });
  return answers.map((a) => ({ address: a.address, family: (a.family === 6 ? 6 : 4) as 4 | 6 }));
}

async function api<T = any>(
  compute: ComputeInstance,
  method: string,
  body: unknown,
  token = ACME,
): Promise<T> {
  const { status, body: answer } = await call(compute, method, body, { token });
  if (status !== 200) throw new Error(`${method} answered ${status}: ${JSON.stringify(answer.error)}`);
  return answer.data as T;
}

async function refusal(compute: ComputeInstance, method: string, body: unknown, token = ACME) {
  const { status, body: answer } = await call(compute, method, body, { token });
  expect(status, JSON.stringify(answer)).toBeGreaterThanOrEqual(400);
  expect(status).toBeLessThan(500);
  return answer.error!;
}

async function until<T>(probe: () => Promise<T | undefined | false>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('the Standard Webhooks signature', () => {
  it('matches the standardwebhooks library’s known-answer vector', () => {
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const expected = 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=';
    expect(signPayload(secret, 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}')).toBe(
      expected,
    );
    expect(
      new Webhook(secret).sign(
        'msg_p5jXN8AQM9LWM0D4loKWxJek',
        new Date(1614265330 * 1000),
        '{"test": 2432232314}',
      ),
    ).toBe(expected);
  });
});

describe.each(kinds)('webhooks on %s', (kind) => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  let workers: { stop(): Promise<void> };
  let receiver: Receiver;

  beforeAll(async () => {
    database = await createTestDatabase(kind, 20);
    compute = await betterCompute(
      {
        database,
        iam: new TestBridge(),
        rateLimit: false,
        secret: 'a deployment secret for the webhook tests',
        webhooks: {
          retrySchedule: Array(12).fill(150),
          jitter: 0,
          requestTimeoutMs: 600,
          pollMs: 40,
          disableAfterMs: 1500,
          maxPerTenant: MAX_PER_TENANT,
          lookup: testLookup,
        },
      },
      { log: () => {} },
    );
    await compute.migrate();
    workers = compute.startWorkers(['sinks']);
    receiver = await startReceiver();
  }, 120_000);

  afterAll(async () => {
    await workers?.stop();
    await receiver?.close();
    await compute?.close();
    await database?.close();
  });

  /** A webhook of acme's on the receiver, with its own path so deliveries can be told apart. */
  async function subscribe(path: string, events: string[], token = ACME) {
    const created = await api<{ webhook: { id: string; version: number }; secret: string }>(
      compute,
      'webhooks.create',
      { url: `${receiver.url}/${path}`, events, idempotencyKey: `create-${path}-${Date.now()}` },
      token,
    );
    return created;
  }

  const at = (path: string) => receiver.received.filter((r) => r.path === `/hook/${path}`);
  const deliveriesOf = (webhookId: string) =>
    api<{ items: any[] }>(compute, 'webhooks.deliveries', { webhookId }).then((page) => page.items);

  it('creates a webhook, answers its secret once, and keeps it sealed everywhere else', async () => {
    const { webhook, secret } = await subscribe('sealed', ['site.*']);
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
    const got = await api(compute, 'webhooks.get', { webhookId: webhook.id });
    const listed = await api(compute, 'webhooks.list', {});
    expect(JSON.stringify([got, listed])).not.toContain(secret.slice(6));
    expect(got).toMatchObject({
      id: webhook.id,
      url: `${receiver.url}/sealed`,
      events: ['site.*'],
      enabled: true,
    });
    const dump = await sql<{ text: string }>`
      select (select coalesce(string_agg(w::text, ' '), '') from compute.webhooks w) ||
        (select coalesce(string_agg(e::text, ' '), '') from compute.events e) ||
        (select coalesce(string_agg(a::text, ' '), '') from compute.audit_events a) ||
        (select coalesce(string_agg(i::text, ' '), '') from compute.idempotency_keys i) as text`.execute(
      database.db,
    );
    expect(dump.rows[0]!.text).not.toContain(secret.slice(6));
    const stored = await sql<{
      secret_sealed: string;
    }>`select secret_sealed from compute.webhooks where id = ${webhook.id}`.execute(database.db);
    expect(stored.rows[0]!.secret_sealed).toMatch(/^v1\./);
    // A retry with the same key answers the same webhook and secret, and creates nothing twice.
    const body = { url: `${receiver.url}/retried`, events: ['site.*'], idempotencyKey: 'retry-key-0001' };
    const first = await api(compute, 'webhooks.create', body);
    const second = await api(compute, 'webhooks.create', body);
    expect(second).toEqual(first);
    expect(
      (await api(compute, 'webhooks.list', {})).items.filter((w: any) => w.url.endsWith('/retried')),
    ).toHaveLength(1);
    await api(compute, 'webhooks.delete', { webhookId: first.webhook.id });
    await api(compute, 'webhooks.delete', { webhookId: webhook.id });
  });

  it('delivers matching events of its tenant only, signed so standardwebhooks verifies them', async () => {
    const { webhook, secret } = await subscribe('sites', ['site.created']);
    const site = await api<{ id: string }>(compute, 'sites.create', { name: 'hooked-site' });
    await api(compute, 'projects.create', { name: 'not-hooked' });
    await api(compute, 'sites.create', { name: 'globex-site' }, GLOBEX);
    const [received] = await receiver.waitFor(() => at('sites').length >= 1).then(() => at('sites'));
    const payload = new Webhook(secret).verify(
      received!.body,
      received!.headers as Record<string, string>,
    ) as any;
    expect(payload).toMatchObject({
      type: 'site.created',
      data: {
        type: 'site.created',
        tenantId: 'acme',
        subject: { type: 'site', id: site.id },
        data: { name: 'hooked-site' },
      },
    });
    expect(received!.headers['content-type']).toBe('application/json');
    expect(received!.headers['webhook-id']).toMatch(/^msg_/);
    expect(Number(received!.headers['webhook-timestamp'])).toBeCloseTo(Date.now() / 1000, -2);
    const deliveries = await until(async () => {
      const items = await deliveriesOf(webhook.id);
      return items.length === 1 && items[0].state === 'succeeded' && items;
    });
    // One delivery; a host slow enough to pass the 600 ms request timeout makes it retry, with the same id.
    expect(deliveries[0]).toMatchObject({ id: received!.headers['webhook-id'], eventType: 'site.created' });
    expect(deliveries[0].attemptLog.at(-1)).toMatchObject({
      statusCode: 200,
      success: true,
      error: null,
      responseExcerpt: 'thanks',
    });
    // Nothing else arrives: not the project, not globex's site.
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(new Set(at('sites').map((r) => r.headers['webhook-id']))).toEqual(
      new Set([received!.headers['webhook-id']]),
    );
    await api(compute, 'webhooks.delete', { webhookId: webhook.id });
  });

  it('retries a failure, a redirect and a timeout with the same id until the receiver recovers', async () => {
    const { webhook, secret } = await subscribe('retry', ['site.updated']);
    const site = await api<{ id: string }>(compute, 'sites.create', { name: 'retry-site' });
    receiver.mode = 'fail';
    await api(compute, 'sites.update', { siteId: site.id, description: 'one' });
    await receiver.waitFor(() => at('retry').length >= 1);
    receiver.mode = 'redirect';
    await receiver.waitFor(() => at('retry').length >= 2);
    receiver.mode = 'hang';
    await receiver.waitFor(() => at('retry').length >= 3);
    receiver.mode = 'ok';
    await receiver.waitFor(() => at('retry').some((r) => r.answered === 'ok'));
    const all = at('retry');
    expect(new Set(all.map((r) => r.headers['webhook-id'])).size).toBe(1);
    for (const r of all) new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
    expect(receiver.received.some((r) => r.path.includes('elsewhere'))).toBe(false);
    const [delivery] = await until(async () => {
      const items = await deliveriesOf(webhook.id);
      return items[0]?.state === 'succeeded' && items;
    });
    const log = delivery.attemptLog;
    // Attempts are numbered in order. A host slow enough to pass the 600 ms request timeout adds a
    // timed-out attempt, so the receiver's answers are found in order rather than at fixed places.
    expect(log.map((a: any) => a.attempt)).toEqual(log.map((_: unknown, index: number) => index + 1));
    const failed = log.findIndex((a: any) => a.statusCode === 500);
    expect(log[failed]).toMatchObject({ statusCode: 500, success: false, error: 'answered 500' });
    expect(log[failed].responseExcerpt).toBe('receiver  [31mbroke  on purpose');
    const redirected = log.findIndex((a: any, index: number) => index > failed && a.statusCode === 302);
    expect(log[redirected]).toMatchObject({ statusCode: 302, success: false });
    expect(log[redirected].error).toMatch(/redirect/);
    const timedOut = log.findIndex((a: any, index: number) => index > redirected && a.statusCode === null);
    expect(log[timedOut]).toMatchObject({
      statusCode: null,
      success: false,
      error: 'timed out after 600 ms',
    });
    expect(log[timedOut].durationMs).toBeGreaterThanOrEqual(590);
    expect(failed).toBeGreaterThanOrEqual(0);
    expect(log.at(-1)).toMatchObject({ statusCode: 200, success: true });
    expect(log.filter((a: any) => a.success)).toHaveLength(1);
    // The failures were shorter than the window: still enabled, and answering again clears the streak.
    expect(await api(compute, 'webhooks.get', { webhookId: webhook.id })).toMatchObject({
      enabled: true,
      failingSince: null,
    });
    await api(compute, 'webhooks.delete', { webhookId: webhook.id });
  });

  it('disables an endpoint that fails for the whole window, with a webhook.disabled event', async () => {
    const { webhook } = await subscribe('dead', ['site.deleted']);
    receiver.mode = 'fail';
    try {
      const site = await api<{ id: string }>(compute, 'sites.create', { name: 'dead-site' });
      await api(compute, 'sites.delete', { siteId: site.id });
      const disabled = await until(async () => {
        const got = await api(compute, 'webhooks.get', { webhookId: webhook.id });
        return got.enabled === false && got;
      });
      expect(disabled.disabledReason).toMatch(
        /every attempt failed for \d+ s \(the limit is 2 s\)|limit is 1 s/,
      );
      const events = await api<{ items: any[] }>(compute, 'events.list', { type: 'webhook.disabled' });
      expect(events.items.map((e) => e.subject.id)).toContain(webhook.id);
      const sent = at('dead').length;
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(at('dead')).toHaveLength(sent);
      expect((await refusal(compute, 'webhooks.ping', { webhookId: webhook.id })).code).toBe('INVALID_STATE');
    } finally {
      receiver.mode = 'ok';
    }
    const enabled = await api(compute, 'webhooks.update', { webhookId: webhook.id, enabled: true });
    expect(enabled).toMatchObject({ enabled: true, disabledReason: null, failingSince: null });
    await receiver.waitFor(() => at('dead').some((r) => r.answered === 'ok'));
    await api(compute, 'webhooks.delete', { webhookId: webhook.id });
  });

  it('signs with the old and the new secret for a day after a rotation; both verify', async () => {
    const { webhook, secret: old } = await subscribe('rotate', ['site.created']);
    const rotated = await api<{ webhook: any; secret: string }>(compute, 'webhooks.rotateSecret', {
      webhookId: webhook.id,
      ifVersion: webhook.version,
    });
    expect(rotated.secret).not.toBe(old);
    const expires = Date.parse(rotated.webhook.previousSecretExpiresAt);
    expect(expires - Date.now()).toBeGreaterThan(23.9 * 3600_000);
    expect(expires - Date.now()).toBeLessThanOrEqual(24 * 3600_000);
    await api(compute, 'sites.create', { name: 'rotate-site' });
    const [received] = await receiver.waitFor(() => at('rotate').length >= 1).then(() => at('rotate'));
    const signatures = String(received!.headers['webhook-signature']).split(' ');
    expect(signatures).toHaveLength(2);
    const id = String(received!.headers['webhook-id']);
    const timestamp = Number(received!.headers['webhook-timestamp']);
    expect(signatures).toEqual([
      signPayload(rotated.secret, id, timestamp, received!.body),
      signPayload(old, id, timestamp, received!.body),
    ]);
    for (const secret of [rotated.secret, old]) {
      const one = { ...received!.headers, 'webhook-signature': signatures[secret === old ? 1 : 0]! };
      new Webhook(secret).verify(received!.body, one as unknown as Record<string, string>);
      new Webhook(secret).verify(received!.body, received!.headers as Record<string, string>);
    }
    const stale = await refusal(compute, 'webhooks.rotateSecret', {
      webhookId: webhook.id,
      ifVersion: webhook.version,
    });
    expect(stale.code).toBe('CONFLICT');
    await api(compute, 'webhooks.delete', { webhookId: webhook.id });
  });

  it('pings one webhook only, and redelivers a delivery with its id and body', async () => {
    const { webhook, secret } = await subscribe('ping', ['site.created']);
    const other = await subscribe('other', ['webhook.*']);
    const pinged = await api(compute, 'webhooks.ping', { webhookId: webhook.id });
    expect(pinged).toMatchObject({ webhookId: webhook.id, eventType: 'webhook.ping', state: 'pending' });
    const [received] = await receiver.waitFor(() => at('ping').length >= 1).then(() => at('ping'));
    expect(received!.headers['webhook-id']).toBe(pinged.id);
    const payload = new Webhook(secret).verify(
      received!.body,
      received!.headers as Record<string, string>,
    ) as any;
    expect(payload).toMatchObject({
      type: 'webhook.ping',
      data: { data: { webhookId: webhook.id, deliveryId: pinged.id } },
    });
    await until(async () => (await deliveriesOf(webhook.id))[0]?.state === 'succeeded');
    const again = await api(compute, 'webhooks.redeliver', { webhookId: webhook.id, deliveryId: pinged.id });
    expect(again).toMatchObject({ id: pinged.id, state: 'pending' });
    await receiver.waitFor(() => at('ping').length >= 2);
    expect(at('ping')[1]!.headers['webhook-id']).toBe(pinged.id);
    expect(at('ping')[1]!.body).toBe(received!.body);
    new Webhook(secret).verify(at('ping')[1]!.body, at('ping')[1]!.headers as Record<string, string>);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(at('other').some((r) => JSON.parse(r.body).type === 'webhook.ping')).toBe(false);
    await api(compute, 'webhooks.delete', { webhookId: webhook.id });
    await api(compute, 'webhooks.delete', { webhookId: other.webhook.id });
  });

  it('refuses endpoints that are not https or loopback http, carry credentials, or point inside', async () => {
    const bad = [
      'http://10.0.0.1/hook',
      'https://10.0.0.1/hook',
      'https://172.16.5.4/',
      'https://192.168.0.10/',
      'https://100.64.0.1/',
      'https://169.254.169.254/latest/meta-data/',
      'https://[::ffff:169.254.169.254]/',
      'https://[::ffff:a9fe:a9fe]/',
      'https://[fe80::1]/',
      'https://[fd00:ec2::254]/',
      'https://0.0.0.0/',
      'https://224.0.0.1/',
      'https://0x0a000001/',
      'http://hooks.example.com/',
      'https://user:pass@hooks.example.com/',
      'ftp://hooks.example.com/',
      'file:///etc/passwd',
      'hooks.example.com',
      'https://hooks.example.com/a b',
      'https://hooks.example.com/\u0000',
      'https://hooks.example.com/#frag',
      `https://hooks.example.com/${'a'.repeat(3000)}`,
    ];
    for (const url of bad) {
      const error = await refusal(compute, 'webhooks.create', { url, events: ['site.*'] });
      expect(error.code, url).toBe('INVALID_ARGUMENT');
      expect(error.message).toMatch(/url/);
    }
    const patterns = await refusal(compute, 'webhooks.create', {
      url: 'https://hooks.example.com/',
      events: ['nothing.*'],
    });
    expect(patterns).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(patterns.message).toContain('nothing.*');
    const nul = await call(
      compute,
      'webhooks.create',
      {},
      {
        token: ACME,
        rawBody: '{"url":"https://a.example/\\u0000","events":["site.*"],"description":"\\u0000"}',
      },
    );
    expect(nul.status).toBe(400);
    const { count } = (
      await sql<{ count: string }>`select count(*) from compute.webhooks where url like '%example%'`.execute(
        database.db,
      )
    ).rows[0]!;
    expect(Number(count)).toBe(0);
    // Loopback by name or address is allowed here (the default); an update is checked the same way.
    const { webhook } = await subscribe('check', ['site.*']);
    const update = await refusal(compute, 'webhooks.update', {
      webhookId: webhook.id,
      url: 'https://169.254.169.254/',
    });
    expect(update.code).toBe('INVALID_ARGUMENT');
    const local = await api(compute, 'webhooks.update', {
      webhookId: webhook.id,
      url: `http://localhost:${receiver.port}/hook/x`,
    });
    expect(local.url).toBe(`http://localhost:${receiver.port}/hook/x`);
    await api(compute, 'webhooks.delete', { webhookId: webhook.id });
  });

  it('checks the resolved address at delivery: a name that resolves inside is never connected to', async () => {
    const hooks: { id: string }[] = [];
    for (const host of ['private.evil.test', 'metadata.evil.test', 'mixed.evil.test']) {
      hooks.push(
        (
          await api(
            compute,
            'webhooks.create',
            { url: `https://${host}/hook`, events: ['project.created'] },
            ROOT,
          )
        ).webhook,
      );
    }
    await api(compute, 'projects.create', { name: 'ssrf-probe' }, ROOT);
    for (const [index, expected] of [
      /not sent: private\.evil\.test resolves to 10\.1\.2\.3, a private address/,
      /not sent: metadata\.evil\.test resolves to 169\.254\.169\.254, a cloud metadata address/,
      /not sent: mixed\.evil\.test resolves to 192\.168\.1\.1, a private address/,
    ].entries()) {
      const [delivery] = await until(async () => {
        const items = (
          await api<{ items: any[] }>(compute, 'webhooks.deliveries', { webhookId: hooks[index]!.id }, ROOT)
        ).items;
        return items[0]?.attemptLog.length > 0 && items;
      });
      expect(delivery.attemptLog[0]).toMatchObject({ statusCode: null, success: false, durationMs: 0 });
      expect(delivery.attemptLog[0].error).toMatch(expected);
    }
    for (const hook of hooks) await api(compute, 'webhooks.delete', { webhookId: hook.id }, ROOT);
  });

  it('caps webhooks per tenant with QUOTA_EXCEEDED naming the limit', async () => {
    const made = [];
    for (let i = 0; i < MAX_PER_TENANT; i++)
      made.push(
        (
          await api(
            compute,
            'webhooks.create',
            { url: 'https://hooks.example.com/', events: ['site.*'] },
            GLOBEX,
          )
        ).webhook,
      );
    const error = await refusal(
      compute,
      'webhooks.create',
      { url: 'https://hooks.example.com/', events: ['site.*'] },
      GLOBEX,
    );
    expect(error.code).toBe('QUOTA_EXCEEDED');
    expect(error.message).toContain(`webhooks per tenant: ${MAX_PER_TENANT}`);
    for (const hook of made) await api(compute, 'webhooks.delete', { webhookId: hook.id }, GLOBEX);
  });

  it('shows another tenant nothing: NOT_FOUND, worded as for a webhook that does not exist', async () => {
    const { webhook } = await subscribe('private', ['site.*']);
    const delivery = (await api(compute, 'webhooks.ping', { webhookId: webhook.id })).id;
    const missing = 'wh_01m00000000000000000000000';
    const calls: [string, Record<string, unknown>][] = [
      ['webhooks.get', {}],
      ['webhooks.update', { description: 'mine now' }],
      ['webhooks.delete', {}],
      ['webhooks.ping', {}],
      ['webhooks.rotateSecret', {}],
      ['webhooks.deliveries', {}],
      ['webhooks.redeliver', { deliveryId: delivery }],
    ];
    for (const [method, extra] of calls) {
      const foreign = await refusal(compute, method, { webhookId: webhook.id, ...extra }, GLOBEX);
      const absent = await refusal(compute, method, { webhookId: missing, ...extra }, GLOBEX);
      expect(foreign.code, method).toBe('NOT_FOUND');
      expect(foreign.message.replace(webhook.id, 'ID')).toBe(absent.message.replace(missing, 'ID'));
      expect(JSON.stringify(foreign)).not.toContain(receiver.url);
    }
    expect((await api(compute, 'webhooks.list', {}, GLOBEX)).items.map((w: any) => w.id)).not.toContain(
      webhook.id,
    );
    const acting = await refusal(
      compute,
      'webhooks.get',
      { tenantId: 'acme', webhookId: webhook.id },
      GLOBEX,
    );
    expect(acting.code).toBe('ACCESS_DENIED');
    expect(await api(compute, 'webhooks.get', { webhookId: webhook.id })).toMatchObject({ description: '' });
    await api(compute, 'webhooks.delete', { webhookId: webhook.id });
  });

  it('writes webhook events the catalog describes, with no field it lacks and never a secret', async () => {
    const { rows } = await sql<{ type: string; subject_type: string; data: Record<string, unknown> }>`
      select type, subject_type, data from compute.events where type like 'webhook.%'`.execute(database.db);
    expect(new Set(rows.map((r) => r.type))).toEqual(
      new Set([
        'webhook.created',
        'webhook.updated',
        'webhook.deleted',
        'webhook.disabled',
        'webhook.secret_rotated',
        'webhook.ping',
      ]),
    );
    for (const row of rows) {
      const spec = eventTypes[row.type as keyof typeof eventTypes];
      expect(spec.subject).toBe(row.subject_type);
      const parsed = spec.data.parse(row.data) as Record<string, unknown>;
      expect(Object.keys(row.data).sort()).toEqual(Object.keys(parsed).sort());
      expect(JSON.stringify(row.data)).not.toMatch(/whsec_/);
    }
  });

  it('prunes finished deliveries past their retention with their attempts, never pending ones', async () => {
    const count = async (where: string) =>
      Number(
        (
          await sql<{
            n: number;
          }>`select count(*)::int as n from compute.webhook_deliveries where ${sql.raw(where)}`.execute(
            database.db,
          )
        ).rows[0]!.n,
      );
    const { webhook } = await subscribe('prune', ['site.*']);
    const pinged = await api(compute, 'webhooks.ping', { webhookId: webhook.id });
    await until(async () => (await deliveriesOf(webhook.id))[0]?.state === 'succeeded');
    const finished = await count("state <> 'pending'");
    const pending = await count("state = 'pending'");
    expect(finished).toBeGreaterThan(0);
    const context = { db: database.db as never, now: () => new Date(), log: () => {} };
    expect(await pruneDeliveries(context, webhookRuntime())).toBe(0);
    expect(await pruneDeliveries(context, { ...webhookRuntime(), retentionMs: 0 })).toBe(finished);
    expect(await count("state <> 'pending'")).toBe(0);
    expect(await count("state = 'pending'")).toBe(pending);
    const orphans = await sql<{ n: number }>`select count(*)::int as n from compute.webhook_attempts a
      where not exists (select 1 from compute.webhook_deliveries d where d.id = a.delivery_id)`.execute(
      database.db,
    );
    expect(orphans.rows[0]!.n).toBe(0);
    expect(await deliveriesOf(webhook.id)).toEqual([]);
    expect(
      (await refusal(compute, 'webhooks.redeliver', { webhookId: webhook.id, deliveryId: pinged.id })).code,
    ).toBe('NOT_FOUND');
    await api(compute, 'webhooks.delete', { webhookId: webhook.id });
  });

  it('lists the catalog’s event types', async () => {
    const { items } = await api<{ items: any[] }>(compute, 'webhooks.eventTypes', {});
    expect(items).toContainEqual(
      expect.objectContaining({ type: 'reservation.created', subject: 'reservation' }),
    );
    expect(items).toContainEqual(expect.objectContaining({ type: 'webhook.disabled', subject: 'webhook' }));
  });
});

describe('the address rules on their own', () => {
  const strict = { ...webhookRuntime({ allowLoopback: false }), lookup: testLookup };

  it('classifies every form of an internal address, IPv4-mapped, NAT64 and 6to4 included', () => {
    const cases: [string, string][] = [
      ['8.8.8.8', 'public'],
      ['2606:4700::1111', 'public'],
      ['127.0.0.2', 'loopback'],
      ['::1', 'loopback'],
      ['10.9.8.7', 'private'],
      ['fd12::1', 'private'],
      ['100.127.255.255', 'cgnat'],
      ['169.254.1.1', 'link-local'],
      ['fe80::abcd', 'link-local'],
      ['169.254.169.254', 'metadata'],
      ['fd00:ec2::254', 'metadata'],
      ['::ffff:169.254.169.254', 'metadata'],
      ['::ffff:a9fe:a9fe', 'metadata'],
      ['64:ff9b::a00:1', 'private'],
      ['2002:7f00:1::', 'loopback'],
      ['0.0.0.0', 'unspecified'],
      ['::', 'unspecified'],
      ['239.1.1.1', 'multicast'],
      ['ff02::1', 'multicast'],
      ['198.51.100.7', 'reserved'],
      ['255.255.255.255', 'broadcast'],
    ];
    // The whole table of spellings is outbound-address.test.ts; these are the ones webhooks met first.
    for (const [address, kind] of cases) expect(classifyHost(address).kind, address).toBe(kind);
  });

  it('with loopback off, refuses it at create and a name that resolves to it at delivery', async () => {
    expect(() => checkEndpoint('http://127.0.0.1:9/hook', strict)).toThrow(/loopback address/);
    expect(() => checkEndpoint('https://localhost/hook', strict)).toThrow(/loopback address/);
    // A public-looking name passes at create; what it resolves to is checked at every attempt.
    expect(checkEndpoint('https://localhost.evil.test/hook', strict)).toBe(
      'https://localhost.evil.test/hook',
    );
    const rebinding = { ...strict, lookup: async () => [{ address: '127.0.0.1', family: 4 as const }] };
    await expect(deliveryAddress(new URL('https://rebind.evil.test/'), rebinding)).rejects.toThrow(
      /rebind\.evil\.test resolves to 127\.0\.0\.1, a loopback address/,
    );
    await expect(
      deliveryAddress(new URL('http://hooks.example.com/'), {
        ...strict,
        lookup: async () => [{ address: '93.184.216.34', family: 4 as const }],
      }),
    ).rejects.toThrow(/http:\/\/ is delivered only to loopback/);
  });

  it('connects to the address checked, whatever the name would resolve to now', async () => {
    const receiver = await startReceiver();
    try {
      // No DNS server knows this name: the connection goes to the address given, never to a lookup.
      const outcome = await sendAttempt({
        url: new URL(`http://never-resolved.invalid:${receiver.port}/hook/pinned`),
        address: { address: '127.0.0.1', family: 4 },
        headers: { 'webhook-id': 'msg_pinned' },
        body: '{}',
        timeoutMs: 2000,
      });
      expect(outcome).toMatchObject({ statusCode: 200, success: true, responseExcerpt: 'thanks' });
      expect(receiver.received[0]).toMatchObject({ path: '/hook/pinned' });
      expect(receiver.received[0]!.headers.host).toBe(`never-resolved.invalid:${receiver.port}`);
    } finally {
      await receiver.close();
    }
  });
});
