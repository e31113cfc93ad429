/**
 * Several delivery loops on one PostgreSQL, as several `sinks` replicas run them: every event is
 * delivered and succeeds exactly once; a delivery claimed by a replica that then died (its claim
 * left to lapse) is taken by another and completed once, the dead claim's late outcome dropped;
 * a dead fan-out leader's lease is taken over within 15 seconds.
 */
import { createTestDatabase, isPostgresReachable, type TestDatabase } from '@better-compute/db/testing';
import { sql } from 'kysely';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import type { WebhookSettings } from '../src/config/define-config.js';
import {
  attemptDelivery,
  claimDeliveries,
  fanOutBatch,
  startWebhookLoops,
} from '../src/modules/webhooks/controller.js';
import { LEASE_TTL_MS } from '../src/workers/leases.js';
import { webhookRuntime } from '../src/modules/webhooks/settings.js';
import { call, TestBridge } from './support.js';
import { type Receiver, startReceiver } from './webhook-receiver.js';

const ACME = 't-acme-admin';
const SETTINGS: WebhookSettings = {
  retrySchedule: [200, 200, 200],
  jitter: 0,
  requestTimeoutMs: 2000,
  pollMs: 40,
};
const SECRET = 'a deployment secret for the replica tests';

async function api<T = any>(compute: ComputeInstance, method: string, body: unknown): Promise<T> {
  const { status, body: answer } = await call(compute, method, body, { token: ACME });
  if (status !== 200) throw new Error(`${method} answered ${status}: ${JSON.stringify(answer.error)}`);
  return answer.data as T;
}

describe.skipIf(!(await isPostgresReachable()))('webhook deliveries across replicas on PostgreSQL', () => {
  let database: TestDatabase;
  const replicas: ComputeInstance[] = [];
  const loops: { stop(): Promise<void> }[] = [];
  let receiver: Receiver;

  beforeAll(async () => {
    database = await createTestDatabase('postgres', 10);
    for (const store of [database, database.url!]) {
      const compute = await betterCompute(
        { database: store, iam: new TestBridge(), rateLimit: false, secret: SECRET, webhooks: SETTINGS },
        { log: () => {} },
      );
      if (replicas.length === 0) await compute.migrate();
      replicas.push(compute);
    }
    receiver = await startReceiver();
  }, 120_000);

  afterAll(async () => {
    await Promise.all(loops.map((l) => l.stop()));
    await receiver?.close();
    for (const r of replicas.reverse()) await r.close();
    await database?.close();
  });

  async function stopLoops() {
    await Promise.all(loops.splice(0).map((l) => l.stop()));
  }

  it('two replicas deliver every event once, each succeeding exactly once', async () => {
    loops.push(replicas[0]!.startWorkers(['sinks']), replicas[1]!.startWorkers(['sinks']));
    const { webhook, secret } = await api(replicas[0]!, 'webhooks.create', {
      url: `${receiver.url}/many`,
      events: ['site.created'],
    });
    const sites = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        api(replicas[i % 2]!, 'sites.create', { name: `replica-site-${i}` }),
      ),
    );
    const received = await receiver.waitFor(
      (r) => r.filter((x) => x.path === '/hook/many').length >= 40,
      30_000,
    );
    const mine = received.filter((x) => x.path === '/hook/many');
    const subjects = mine.map(
      (r) => (new Webhook(secret).verify(r.body, r.headers as Record<string, string>) as any).data.subject.id,
    );
    expect(new Set(subjects)).toEqual(new Set(sites.map((s: { id: string }) => s.id)));
    expect(new Set(mine.map((r) => r.headers['webhook-id'])).size).toBe(40);
    // The receiver answers before the attempt is recorded: wait for the records.
    const settled = async () =>
      (
        await sql<{ pending: number }>`select count(*)::int as pending from compute.webhook_deliveries
          where webhook_id = ${webhook.id} and state = 'pending'`.execute(database.db)
      ).rows[0]!.pending === 0;
    for (let i = 0; i < 100 && !(await settled()); i++)
      await new Promise((resolve) => setTimeout(resolve, 50));
    const rows = await sql<{ state: string; successes: string; attempts: string }>`
      select d.state, count(a.*) filter (where a.success) as successes, count(a.*) as attempts
      from compute.webhook_deliveries d left join compute.webhook_attempts a on a.delivery_id = d.id
      where d.webhook_id = ${webhook.id} group by d.id, d.state`.execute(database.db);
    expect(rows.rows).toHaveLength(40);
    for (const row of rows.rows)
      expect({ ...row, successes: Number(row.successes), attempts: Number(row.attempts) }).toEqual({
        state: 'succeeded',
        successes: 1,
        attempts: 1,
      });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receiver.received.filter((x) => x.path === '/hook/many')).toHaveLength(40);
    await stopLoops();
  }, 120_000);

  it('a claim left by a dead replica lapses and is completed by another, once', async () => {
    await stopLoops();
    const { webhook, secret } = await api(replicas[0]!, 'webhooks.create', {
      url: `${receiver.url}/orphan`,
      events: ['project.created'],
    });
    await api(replicas[0]!, 'projects.create', { name: 'orphaned' });
    const context = { db: database.db as never, now: () => new Date(), log: () => {} };
    // The outbox is read below the cluster's oldest running transaction: retry until it is read.
    for (let i = 0; i < 200 && (await fanOutBatch(context)).deliveries === 0; i++)
      await new Promise((resolve) => setTimeout(resolve, 50));
    // The replica that dies: it claims the delivery for 1.5 s and is never heard of again.
    const dead = { ...webhookRuntime(SETTINGS, SECRET), leaseMs: 1500 };
    const claimedAt = Date.now();
    const [claimed] = await claimDeliveries(context, dead, 'runner_dead');
    expect(claimed).toMatchObject({ webhook_id: webhook.id, attempts: 1 });
    loops.push(replicas[1]!.startWorkers(['sinks']));
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(receiver.received.filter((r) => r.path === '/hook/orphan')).toHaveLength(0);
    const [first] = await receiver.waitFor((r) => r.some((x) => x.path === '/hook/orphan'), 10_000);
    void first;
    const retakenMs = Date.now() - claimedAt;
    expect(retakenMs).toBeGreaterThanOrEqual(1400);
    expect(retakenMs).toBeLessThan(6000);
    const delivered = receiver.received.find((r) => r.path === '/hook/orphan')!;
    expect(delivered.headers['webhook-id']).toBe(claimed!.id);
    new Webhook(secret).verify(delivered.body, delivered.headers as Record<string, string>);
    // The dead replica wakes up late and sends anyway (at least once): its outcome is not recorded.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await attemptDelivery(context, dead, 'runner_dead', claimed!)).toBe(false);
    const attempts = await sql<{ attempt: number; runner: string; success: boolean }>`
      select attempt, runner, success from compute.webhook_attempts where delivery_id = ${claimed!.id}
      order by attempt`.execute(database.db);
    expect(attempts.rows).toHaveLength(1);
    expect(attempts.rows[0]).toMatchObject({ attempt: 2, success: true });
    expect(attempts.rows[0]!.runner).not.toBe('runner_dead');
    await stopLoops();
  }, 120_000);

  it('an attempt longer than the lease keeps its claim while its replica lives: sent once', async () => {
    await stopLoops();
    const { webhook } = await api(replicas[0]!, 'webhooks.create', {
      url: `${receiver.url}/slow`,
      events: ['project.created'],
    });
    // Two replicas with a 1.5 s lease and a receiver that answers nothing for the 4 s timeout.
    const short = { ...webhookRuntime({ ...SETTINGS, requestTimeoutMs: 4000 }, SECRET), leaseMs: 1500 };
    const context = { db: database.db as never, now: () => new Date(), log: () => {} };
    receiver.mode = 'hang';
    try {
      loops.push(startWebhookLoops(context, short), startWebhookLoops(context, short));
      await api(replicas[0]!, 'projects.create', { name: 'slow-receiver' });
      await receiver.waitFor((r) => r.some((x) => x.path === '/hook/slow'), 10_000);
      // More than twice the lease, less than the attempt's 4 s: without renewal the other replica
      // would have taken the claim after 1.5 s and sent it again.
      await new Promise((resolve) => setTimeout(resolve, 3200));
      expect(receiver.received.filter((x) => x.path === '/hook/slow')).toHaveLength(1);
      receiver.mode = 'ok';
      const recorded = async () =>
        (
          await sql<{ attempt: number; error: string | null }>`
            select a.attempt, a.error from compute.webhook_attempts a
            join compute.webhook_deliveries d on d.id = a.delivery_id
            where d.webhook_id = ${webhook.id} order by a.attempt`.execute(database.db)
        ).rows;
      let attempts = await recorded();
      for (let i = 0; i < 100 && attempts.length === 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        attempts = await recorded();
      }
      expect(attempts[0]).toMatchObject({ attempt: 1, error: 'timed out after 4000 ms' });
    } finally {
      receiver.mode = 'ok';
      await stopLoops();
    }
  }, 120_000);

  it('a dead fan-out leader’s lease is taken over within 15 seconds (its 8 s lease and a poll)', async () => {
    await stopLoops();
    expect(webhookRuntime().leaseMs).toBe(LEASE_TTL_MS);
    const { webhook } = await api(replicas[0]!, 'webhooks.create', {
      url: `${receiver.url}/leader`,
      events: ['site.created'],
    });
    // What a replica killed while leading leaves: the lease it renewed a moment ago.
    await sql`insert into compute.leases (name, holder, expires_at) values ('webhooks.fanout', 'runner_killed', now() + interval '8 seconds')
      on conflict (name) do update set holder = excluded.holder, expires_at = excluded.expires_at`.execute(
      database.db,
    );
    const killedAt = Date.now();
    loops.push(replicas[1]!.startWorkers(['sinks']));
    await api(replicas[1]!, 'sites.create', { name: 'after-the-leader' });
    await receiver.waitFor((r) => r.some((x) => x.path === '/hook/leader'), 16_000);
    const tookOverMs = Date.now() - killedAt;
    expect(tookOverMs).toBeGreaterThan(7_000);
    expect(tookOverMs).toBeLessThan(15_000);
    await api(replicas[0]!, 'webhooks.delete', { webhookId: webhook.id });
    await stopLoops();
  }, 120_000);
});
