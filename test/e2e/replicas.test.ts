/**
 * Three `serve` replicas on one PostgreSQL, killed with SIGKILL twenty times while tenants reserve
 * and release through them: first with the roles split (two `api`, one `controllers,sinks`), then
 * with every role on every replica. A client retries a call a dead replica dropped on another one,
 * with the same idempotency key, as the CLI and the client do, and a watcher follows the live stream
 * of each replica, resuming with Last-Event-ID whenever its replica comes back. Afterwards: every
 * retried reserve made exactly one reservation, every reservation ended, every watcher saw every
 * event exactly once and in order, a webhook received every event signed as Standard Webhooks says
 * and no delivery succeeded twice, no job was left behind, and a dead replica's leases went to a
 * live one (within 45 s: a bound on being taken over at all, not on speed, which a loaded machine
 * stretches; the lease's own takeover time is a benchmark's figure).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@better-compute/core';
import { createTestDatabase, isPostgresReachable, type TestDatabase } from '@better-compute/db/testing';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createComputeClient, type WatchedEvent } from '../../packages/client/src/index.js';
import { betterCompute } from '../../packages/better-compute/src/index.js';
import {
  type SimulatedFleet,
  startSimulatedFleet,
} from '../../packages/better-compute/src/sim/fleet-runner.js';
import type { ComputeInstance } from '../../packages/better-compute/src/types.js';
import { type Receiver, startReceiver } from '../../packages/better-compute/test/webhook-receiver.js';
import { ReplicaSet } from './replica-support.js';
import { freePort } from './support.js';

const postgres = await isPostgresReachable();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const KILLS_PER_PHASE = 10;

async function waitFor(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition() && Date.now() < deadline) await sleep(50);
}

interface Answer {
  data?: Record<string, any>;
  error?: { code: string; message: string };
}

describe.runIf(postgres)('three serve replicas on one PostgreSQL, killed twenty times', () => {
  const cwd = mkdtempSync(join(tmpdir(), 'bc-replicas-'));
  let database: TestDatabase;
  let compute: ComputeInstance;
  let fleet: SimulatedFleet;
  let replicas: ReplicaSet;
  let sql: pg.Client;
  let token = '';
  let receiver: Receiver;

  beforeAll(async () => {
    database = await createTestDatabase('postgres', 2);
    const secret = randomBytes(32).toString('base64url');
    // The test's own process holds the simulated machines: they join and heartbeat in process.
    compute = await betterCompute({ database: database.url!, secret }, { log: () => {} });
    await compute.migrate();
    const accounts = (await compute.embeddedIam!.bootstrapDev())!;
    token = accounts.acmeAdmin.apiKey;
    fleet = await startSimulatedFleet(compute, {
      nodes: 8,
      token: accounts.rootAdmin.apiKey,
      offerTo: ['acme'],
      heartbeatMs: 2_000,
    });
    receiver = await startReceiver();
    sql = new pg.Client({ connectionString: database.url! });
    await sql.connect();
    replicas = new ReplicaSet({
      cwd,
      env: { HOME: cwd, BETTER_COMPUTE_DATABASE_URL: database.url!, BETTER_COMPUTE_SECRET: secret },
    });
    const [a, b, c] = await Promise.all([freePort(), freePort(), freePort()]);
    replicas.add('a', a!, 'api');
    replicas.add('b', b!, 'api');
    replicas.add('c', c!, 'controllers,sinks');
    await Promise.all(replicas.replicas.map((replica) => replicas.start(replica)));
  }, 120_000);

  afterAll(async () => {
    await replicas?.stopAll();
    await fleet?.stop();
    await sql?.end();
    await receiver?.close();
    await compute?.close();
    await database?.close();
    rmSync(cwd, { recursive: true, force: true });
  }, 120_000);

  /**
   * One call as a client makes it: to a live API replica, again on another one when the connection
   * breaks, and again after the wait a RATE_LIMITED answer names, until the deadline. Other answers
   * (errors included) are returned as they came.
   */
  async function call(method: string, body: Record<string, unknown>): Promise<Answer> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const live = replicas.apis();
      const replica = live[Math.floor(Math.random() * live.length)];
      if (replica) {
        try {
          const response = await fetch(`${replica.url}/${method.replaceAll('.', '/')}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify(body),
            signal: AbortSignal.timeout(15_000),
          });
          if (response.status >= 500) throw new Error(`${response.status}: ${await response.text()}`);
          const answer = (await response.json()) as Answer & {
            error?: { details?: { retryAfterMs?: number } };
          };
          // As the client does: a short RATE_LIMITED is waited out and the call sent again.
          if (answer.error?.code !== 'RATE_LIMITED') return answer;
          await sleep(Math.max(20, answer.error.details?.retryAfterMs ?? 100));
          continue;
        } catch (error) {
          if (Date.now() > deadline) throw error;
        }
      }
      await sleep(100);
    }
  }

  /**
   * Polls the controller lease and records the longest time between two of its renewals: a holder
   * renews every pass, so a long gap is the time a dead holder kept it from the live replicas.
   */
  function watchControllerLease() {
    let longestGapMs = 0;
    let renewals = 0;
    let stopped = false;
    const done = (async () => {
      let last: number | undefined;
      while (!stopped) {
        const { rows } = await sql.query<{ expires_at: Date }>(
          `select expires_at from compute.leases where name = 'fleet.controller'`,
        );
        const expiresAt = rows[0]?.expires_at.getTime();
        if (expiresAt !== undefined && expiresAt !== last) {
          if (last !== undefined) longestGapMs = Math.max(longestGapMs, expiresAt - last);
          last = expiresAt;
          renewals++;
        }
        await sleep(200);
      }
    })();
    return {
      renewals: () => renewals,
      async stop() {
        stopped = true;
        await done;
        return { longestGapMs, renewals };
      },
    };
  }

  it('loses no reservation, event or job, and hands a dead replica’s leases on', async () => {
    const made = new Map<string, string>();
    let running = true;
    const errors: string[] = [];
    const worker = async () => {
      while (running) {
        const idempotencyKey = newId('request').slice(4);
        const body = {
          tenantId: 'acme',
          poolId: fleet.poolId,
          gpus: 1 + Math.floor(Math.random() * 2),
          durationSeconds: 600,
          idempotencyKey,
        };
        const created = await call('reservations.create', body);
        if (!created.data) {
          errors.push(`reserve: ${created.error?.code}: ${created.error?.message}`);
          continue;
        }
        // A retry of the same key answers with the same reservation, never a second one.
        const again = await call('reservations.create', body);
        if (again.data?.id !== created.data.id)
          errors.push(`retried reserve: ${JSON.stringify(again.error ?? again.data)} for ${created.data.id}`);
        made.set(idempotencyKey, created.data.id as string);
        const released = await call('reservations.release', {
          tenantId: 'acme',
          reservationId: created.data.id,
        });
        // A release a dead replica committed but did not answer is seen ended on the retry.
        if (released.error && released.error.code !== 'INVALID_STATE')
          errors.push(`release: ${released.error.code}: ${released.error.message}`);
      }
    };
    // One watcher per replica, from the start of the outbox; the third replica serves
    // no API until phase 2, so its watcher retries until then and catches up from its cursor.
    const hook = await call('webhooks.create', {
      tenantId: 'acme',
      url: receiver.url,
      events: ['reservation.*'],
    });
    const secret = hook.data!.secret as string;
    // Each delivery is verified as it arrives: the library refuses a timestamp minutes old.
    const delivered = new Set<string>();
    let verified = 0;
    const verifyReceived = () => {
      for (; verified < receiver.received.length; verified++) {
        const request = receiver.received[verified]!;
        const payload = new Webhook(secret).verify(
          request.body,
          request.headers as Record<string, string>,
        ) as {
          data: { id: string };
        };
        delivered.add(payload.data.id);
      }
    };
    const verifying = setInterval(verifyReceived, 250);
    const seen = replicas.replicas.map(() => [] as WatchedEvent[]);
    const watchers = replicas.replicas.map((replica, index) =>
      createComputeClient({ baseURL: replica.url, token, tenant: 'acme' }).$watch({
        types: ['reservation.*'],
        since: '0.0',
        initialBackoffMs: 100,
        maxBackoffMs: 500,
        onEvent: (event) => void seen[index]!.push(event),
      }),
    );
    const workers = Array.from({ length: 4 }, worker);
    // A replica is killed every second or two and started again in the background, so at times two
    // are down at once; the last live API replica is spared so clients always have somewhere to go.
    const restarts: Promise<void>[] = [];
    const kill = async (roles?: string) => {
      const candidates = replicas.replicas.filter(
        (replica) => replica.alive && !(replicas.apis().length === 1 && replicas.apis()[0] === replica),
      );
      const victim = candidates[Math.floor(Math.random() * candidates.length)];
      if (!victim) return;
      await replicas.kill(victim);
      restarts.push(sleep(200 + Math.random() * 400).then(() => replicas.start(victim, roles)));
    };
    // Phase 1: the roles split; the API answers from one replica while the other is down.
    for (let round = 0; round < KILLS_PER_PHASE; round++) {
      await sleep(1_000 + Math.random() * 1_000);
      await kill();
    }
    await Promise.all(restarts.splice(0));
    // Phase 2: every role on every replica (each one killed on the way over), so when one dies the
    // others take over its leases and jobs; the controller's lease is watched from here on.
    for (const replica of replicas.replicas) {
      await replicas.kill(replica);
      await replicas.start(replica, 'api,controllers,sinks');
    }
    const lease = watchControllerLease();
    for (let round = 0; round < KILLS_PER_PHASE; round++) {
      await sleep(1_000 + Math.random() * 1_000);
      await kill('api,controllers,sinks');
    }
    await Promise.all(restarts.splice(0));
    const renewalsAfterKills = lease.renewals();
    await sleep(3_000);
    running = false;
    await Promise.all(workers);
    expect(errors).toEqual([]);
    expect(made.size).toBeGreaterThan(20);

    // Every key made one reservation, and every reservation of the run has ended.
    const { rows: reservations } = await sql.query<{ id: string; state: string }>(
      `select id, state from compute.reservations where tenant_id = 'acme'`,
    );
    expect(reservations).toHaveLength(made.size);
    expect(new Set(reservations.map((r) => r.id))).toEqual(new Set(made.values()));
    expect(reservations.filter((r) => r.state !== 'ended')).toEqual([]);

    // Every reserve and every end wrote its event once.
    const { rows: counts } = await sql.query<{ type: string; n: number }>(
      `select type, count(*)::int as n from compute.events
       where tenant_id = 'acme' and type like 'reservation.%'
         and type in ('reservation.created', 'reservation.released', 'reservation.cancelled')
       group by type order by type`,
    );
    const count = (type: string) => counts.find((row) => row.type === type)?.n ?? 0;
    expect(count('reservation.created')).toBe(made.size);
    expect(count('reservation.released') + count('reservation.cancelled')).toBe(made.size);

    // Every watcher saw exactly the tenant's reservation events, once each, in the outbox's order.
    const { rows: outbox } = await sql.query<{ id: string }>(
      `select id from compute.events where tenant_id = 'acme' and type like 'reservation.%'
       order by tx_id, tx_index`,
    );
    for (const [index, events] of seen.entries()) {
      await waitFor(() => events.length >= outbox.length, 20_000);
      expect({ replica: index, ids: events.map((event) => event.id) }).toEqual({
        replica: index,
        ids: outbox.map((row) => row.id),
      });
    }
    for (const watcher of watchers) watcher.stop();

    // The webhook got every event at least once (a replica killed after sending and before recording
    // sends again), each delivery verified by the Standard Webhooks library, and none succeeded twice.
    await waitFor(() => outbox.every((row) => delivered.has(row.id)), 60_000);
    clearInterval(verifying);
    verifyReceived();
    const missing = outbox.filter((row) => !delivered.has(row.id)).map((row) => row.id);
    if (missing.length > 0) {
      const { rows: states } = await sql.query(
        `select d.state, d.attempts, count(*)::int as n from compute.webhook_deliveries d
         where d.event_id = any($1) group by 1, 2`,
        [missing],
      );
      const { rows: cursor } = await sql.query(`select tx_id::text, tx_index from compute.webhook_cursor`);
      expect({ missing: missing.length, states, cursor }).toEqual({ missing: 0 });
    }
    const { rows: twice } = await sql.query(
      `select delivery_id from compute.webhook_attempts where success group by delivery_id having count(*) > 1`,
    );
    expect(twice).toEqual([]);

    // No job was lost: within a lease's time every claim of a dead runner has been taken again.
    await sleep(9_000);
    const { rows: stuck } = await sql.query(
      `select id, kind, state, locked_until from compute.jobs
       where (state = 'running' and locked_until < now()) or state = 'failed'`,
    );
    expect(stuck).toEqual([]);
    // The controller's lease moved on from every dead holder: once the kills end, a live replica
    // holds it and renews it again and again. How many renewals happen during the kills depends on
    // the host's load, so only the ones after them are counted, with a generous wait; the longest
    // gap's bound is over five lease periods (LEASE_TTL_MS, 8 s), for the same reason (issue 38: no
    // test depends on the host being quiet).
    await waitFor(() => lease.renewals() >= renewalsAfterKills + 2, 60_000);
    const { longestGapMs, renewals } = await lease.stop();
    expect(renewals - renewalsAfterKills).toBeGreaterThanOrEqual(2);
    expect(longestGapMs).toBeLessThan(45_000);
  }, 300_000);
});
