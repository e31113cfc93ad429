/**
 * The webhook loops of a `sinks` replica.
 *
 * Fan-out: under a leader lease, reads the outbox in position order from a stored cursor (only
 * below the oldest running transaction, as events.list does, so an event that commits late with a
 * lower position is never skipped) and inserts one delivery per matching webhook and event
 * (unique, so reading an event twice inserts nothing twice), moving the cursor in that transaction.
 *
 * Delivery: claims due deliveries with FOR UPDATE SKIP LOCKED for a lease a little longer than an
 * attempt may take, sends them, and records each attempt under the claim: an outcome whose claim
 * lapsed and was taken by another replica is dropped, so a delivery succeeds once. A replica
 * killed mid-way leaves its claims to lapse, and another takes them.
 */
import { formatListCursor, newId } from '@better-compute/core';
import { sql } from 'kysely';
import { writeEvents } from '../../db/unit-of-work.js';
import { acquireLease, LEASE_TTL_MS, releaseLease } from '../../workers/leases.js';
import { AddressRefused, deliveryAddress } from './address-check.js';
import { type AttemptOutcome, sendAttempt } from './sender.js';
import { retryDelay, type WebhookRuntime } from './settings.js';
import { webhookHeaders } from './signing.js';
import { patternsMatch } from './subscriptions.js';
import { webhooksDb } from './tables.js';
import type { LoopContext } from '../define-module.js';
import { SETTLED_HORIZON } from '../../db/settled.js';

const FANOUT_LEASE = 'webhooks.fanout';
const FANOUT_BATCH = 500;
const CLAIM_BATCH = 20;
const PRUNE_EVERY_MS = 10 * 60_000;
const PRUNE_BATCH = 5000;
/** Attempts one replica runs at once. */
const IN_FLIGHT = 32;

interface OutboxRow {
  id: string;
  tx: string;
  tx_index: number;
  type: string;
  tenant_id: string;
  subject_type: string;
  subject_id: string | null;
  data: Record<string, unknown>;
  actor: string | null;
  request_id: string | null;
  occurred_at: Date | string;
}

/** The body of a delivery: Standard Webhooks' `{ type, timestamp, data }`, data the event record. */
function deliveryBody(event: OutboxRow): string {
  const occurredAt = new Date(event.occurred_at).toISOString();
  return JSON.stringify({
    type: event.type,
    timestamp: occurredAt,
    data: {
      id: event.id,
      position: formatListCursor({ tx: event.tx, index: event.tx_index }),
      type: event.type,
      tenantId: event.tenant_id,
      subject: { type: event.subject_type, id: event.subject_id },
      data: event.data,
      actor: event.actor,
      requestId: event.request_id,
      occurredAt,
    },
  });
}

/** One batch of the fan-out; answers how many events it read (FANOUT_BATCH: there may be more). */
export async function fanOutBatch(context: LoopContext): Promise<{ events: number; deliveries: number }> {
  return context.db.transaction().execute(async (trx) => {
    const db = webhooksDb(trx);
    // A cursor starts at the oldest running transaction: events written before webhooks ran are not sent.
    await sql`insert into compute.webhook_cursor (name, tx_id, tx_index)
      values ('fanout', ${SETTLED_HORIZON}, -1) on conflict (name) do nothing`.execute(db);
    const cursor = (
      await sql<{ tx: string; tx_index: number }>`
        select tx_id::text as tx, tx_index from compute.webhook_cursor where name = 'fanout' for update`.execute(
        db,
      )
    ).rows[0]!;
    // Raw SQL: Kysely has no builder for snapshot functions or xid8 row comparisons.
    const { rows: events } = await sql<OutboxRow>`
      select id, tx_id::text as tx, tx_index, type, tenant_id, subject_type, subject_id, data, actor,
        request_id, occurred_at
      from compute.events
      where (tx_id, tx_index) > (${cursor.tx}::xid8, ${cursor.tx_index})
        and tx_id < ${SETTLED_HORIZON}
      order by tx_id, tx_index
      limit ${FANOUT_BATCH}`.execute(db);
    if (events.length === 0) return { events: 0, deliveries: 0 };
    const tenants = [...new Set(events.map((e) => e.tenant_id))];
    const webhooks = await db
      .selectFrom('compute.webhooks')
      .select(['id', 'tenant_id', 'events'])
      .where('tenant_id', 'in', tenants)
      .where('enabled', '=', true)
      .orderBy('id')
      .execute();
    const now = context.now();
    const rows = [];
    for (const event of events) {
      const targets =
        event.type === 'webhook.ping'
          ? webhooks.filter((w) => w.id === event.data.webhookId && w.tenant_id === event.tenant_id)
          : webhooks.filter((w) => w.tenant_id === event.tenant_id && patternsMatch(w.events, event.type));
      if (targets.length === 0) continue;
      const body = deliveryBody(event);
      for (const webhook of targets) {
        rows.push({
          id:
            event.type === 'webhook.ping' && typeof event.data.deliveryId === 'string'
              ? event.data.deliveryId
              : newId('webhookDelivery'),
          tenant_id: event.tenant_id,
          webhook_id: webhook.id,
          event_id: event.id,
          event_type: event.type,
          body,
          next_attempt_at: now,
          locked_by: null,
          locked_until: null,
          created_at: now,
          finished_at: null,
        });
      }
    }
    for (let at = 0; at < rows.length; at += 200) {
      await db
        .insertInto('compute.webhook_deliveries')
        .values(rows.slice(at, at + 200))
        .onConflict((oc) => oc.doNothing())
        .execute();
    }
    const last = events.at(-1)!;
    await sql`update compute.webhook_cursor set tx_id = ${last.tx}::xid8, tx_index = ${last.tx_index}
      where name = 'fanout'`.execute(db);
    return { events: events.length, deliveries: rows.length };
  });
}

interface Claimed {
  id: string;
  webhook_id: string;
  body: string;
  attempts: number;
}

/** Claims up to `limit` due deliveries of enabled webhooks for `runner`. */
export async function claimDeliveries(
  context: LoopContext,
  runtime: WebhookRuntime,
  runner: string,
  limit = CLAIM_BATCH,
): Promise<Claimed[]> {
  const now = context.now();
  const until = new Date(now.getTime() + runtime.leaseMs);
  // Raw SQL: one statement, so two runners never take the same row; SKIP LOCKED passes over rows
  // another runner is claiming right now instead of waiting for them.
  const { rows } = await sql<Claimed>`
    update compute.webhook_deliveries set locked_by = ${runner}, locked_until = ${until},
      attempts = attempts + 1
    where id in (
      select d.id from compute.webhook_deliveries d
      join compute.webhooks w on w.id = d.webhook_id
      where d.state = 'pending' and d.next_attempt_at <= ${now}
        and (d.locked_until is null or d.locked_until < ${now}) and w.enabled
      order by d.next_attempt_at, d.id
      limit ${limit}
      for update of d skip locked
    )
    returning id, webhook_id, body, attempts`.execute(context.db);
  return rows;
}

/** Extends the claims `runner` still holds on these deliveries by a lease from now. */
async function renewClaims(
  context: LoopContext,
  runtime: WebhookRuntime,
  runner: string,
  ids: readonly string[],
): Promise<void> {
  await webhooksDb(context.db)
    .updateTable('compute.webhook_deliveries')
    .set({ locked_until: new Date(context.now().getTime() + runtime.leaseMs) })
    .where('id', 'in', ids)
    .where('locked_by', '=', runner)
    .where('state', '=', 'pending')
    .execute();
}

/** Sends one claimed delivery and records the attempt; false when the claim was lost meanwhile. */
export async function attemptDelivery(
  context: LoopContext,
  runtime: WebhookRuntime,
  runner: string,
  claimed: Claimed,
): Promise<boolean> {
  const webhook = await webhooksDb(context.db)
    .selectFrom('compute.webhooks')
    .select(['id', 'url', 'secret_sealed', 'previous_secret_sealed', 'previous_secret_expires_at'])
    .where('id', '=', claimed.webhook_id)
    .executeTakeFirst();
  if (!webhook) return false;
  const at = context.now();
  let outcome: AttemptOutcome;
  try {
    const url = new URL(webhook.url);
    const address = await deliveryAddress(url, runtime);
    const secrets = [runtime.sealer.open(webhook.secret_sealed, webhook.id)];
    if (
      webhook.previous_secret_sealed &&
      webhook.previous_secret_expires_at &&
      new Date(webhook.previous_secret_expires_at) > at
    )
      secrets.push(runtime.sealer.open(webhook.previous_secret_sealed, webhook.id));
    const timestamp = Math.floor(at.getTime() / 1000);
    outcome = await sendAttempt({
      url,
      address,
      headers: webhookHeaders(secrets, claimed.id, timestamp, claimed.body),
      body: claimed.body,
      timeoutMs: runtime.requestTimeoutMs,
    });
  } catch (error) {
    if (!(error instanceof AddressRefused))
      context.log({ level: 'warn', message: `webhook delivery ${claimed.id} failed`, error });
    outcome = {
      statusCode: null,
      durationMs: 0,
      success: false,
      error:
        error instanceof AddressRefused
          ? `not sent: ${error.message}`
          : 'not sent: the delivery could not be prepared',
      responseExcerpt: null,
    };
  }
  return recordAttempt(context, runtime, runner, claimed, at, outcome);
}

async function recordAttempt(
  context: LoopContext,
  runtime: WebhookRuntime,
  runner: string,
  claimed: Claimed,
  at: Date,
  outcome: AttemptOutcome,
): Promise<boolean> {
  return context.db.transaction().execute(async (trx) => {
    const db = webhooksDb(trx);
    const delivery = await db
      .selectFrom('compute.webhook_deliveries')
      .select(['id', 'tenant_id', 'webhook_id', 'schedule_step', 'state'])
      .where('id', '=', claimed.id)
      .where('locked_by', '=', runner)
      .where('attempts', '=', claimed.attempts)
      .forUpdate()
      .executeTakeFirst();
    // Taken by another runner after this claim lapsed (or deleted with its webhook): its outcome is theirs.
    if (!delivery || delivery.state !== 'pending') return false;
    const now = context.now();
    await db
      .insertInto('compute.webhook_attempts')
      .values({
        delivery_id: delivery.id,
        attempt: claimed.attempts,
        runner,
        at,
        status_code: outcome.statusCode,
        duration_ms: outcome.durationMs,
        success: outcome.success,
        error: outcome.error,
        response_excerpt: outcome.responseExcerpt,
      })
      .execute();
    const webhook = await db
      .selectFrom('compute.webhooks')
      .select(['id', 'tenant_id', 'enabled', 'failing_since', 'version'])
      .where('id', '=', delivery.webhook_id)
      .forUpdate()
      .executeTakeFirstOrThrow();
    if (outcome.success) {
      await db
        .updateTable('compute.webhook_deliveries')
        .set({
          state: 'succeeded',
          finished_at: now,
          next_attempt_at: null,
          locked_by: null,
          locked_until: null,
        })
        .where('id', '=', delivery.id)
        .execute();
      if (webhook.failing_since !== null)
        await db
          .updateTable('compute.webhooks')
          .set({ failing_since: null })
          .where('id', '=', webhook.id)
          .execute();
      return true;
    }
    const delay = retryDelay(runtime, delivery.schedule_step);
    await db
      .updateTable('compute.webhook_deliveries')
      .set(
        delay === null
          ? { state: 'failed', finished_at: now, next_attempt_at: null, locked_by: null, locked_until: null }
          : {
              next_attempt_at: new Date(now.getTime() + delay),
              schedule_step: delivery.schedule_step + 1,
              locked_by: null,
              locked_until: null,
            },
      )
      .where('id', '=', delivery.id)
      .execute();
    const failingSince = webhook.failing_since ? new Date(webhook.failing_since) : at;
    if (webhook.enabled && now.getTime() - failingSince.getTime() >= runtime.disableAfterMs) {
      const reason = `every attempt failed for ${Math.round((now.getTime() - failingSince.getTime()) / 1000)} s (the limit is ${Math.round(runtime.disableAfterMs / 1000)} s); the last: ${outcome.error ?? 'failed'}`;
      await db
        .updateTable('compute.webhooks')
        .set({
          enabled: false,
          disabled_reason: reason.slice(0, 500),
          failing_since: failingSince,
          version: webhook.version + 1,
          updated_at: now,
        })
        .where('id', '=', webhook.id)
        .execute();
      await writeEvents(
        trx,
        [
          {
            type: 'webhook.disabled',
            subject: { type: 'webhook', id: webhook.id },
            data: { reason: reason.slice(0, 500), failingSince: failingSince.toISOString() },
          },
        ],
        { tenantId: webhook.tenant_id, actor: null, requestId: `webhook:${webhook.id}` },
      );
    } else if (webhook.failing_since === null) {
      await db
        .updateTable('compute.webhooks')
        .set({ failing_since: at })
        .where('id', '=', webhook.id)
        .execute();
    }
    return true;
  });
}

/**
 * Deletes finished deliveries (and their attempts) older than the retention, a bounded batch at a
 * time; the fan-out's leader runs it now and then, so the tables do not grow without end.
 */
export async function pruneDeliveries(context: LoopContext, runtime: WebhookRuntime): Promise<number> {
  const before = new Date(context.now().getTime() - runtime.retentionMs);
  // Raw SQL: a bounded delete (Kysely's delete has no limit on PostgreSQL).
  const { rows } = await sql<{ id: string }>`
    delete from compute.webhook_deliveries where id in (
      select id from compute.webhook_deliveries
      where state <> 'pending' and finished_at < ${before}
      limit ${PRUNE_BATCH}
    )
    returning id`.execute(context.db);
  return rows.length;
}

/** Runs the fan-out and delivery loops until stopped. */
export function startWebhookLoops(context: LoopContext, runtime: WebhookRuntime): { stop(): Promise<void> } {
  const runner = newId('job').replace('job_', 'runner_');
  let stopped = false;
  const sleepers = new Set<() => void>();
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        sleepers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      sleepers.add(wake);
    });
  let wakeDelivery: (() => void) | undefined;

  let lastPrune = 0;
  const fanOut = (async () => {
    let leader = false;
    while (!stopped) {
      try {
        leader = await acquireLease(context.db, {
          name: FANOUT_LEASE,
          holder: runner,
          ttlMs: LEASE_TTL_MS,
          now: context.now(),
        });
        if (leader) {
          let batch;
          do {
            batch = await fanOutBatch(context);
            if (batch.deliveries > 0) wakeDelivery?.();
          } while (!stopped && batch.events === FANOUT_BATCH);
          if (Date.now() - lastPrune >= PRUNE_EVERY_MS) {
            lastPrune = Date.now();
            await pruneDeliveries(context, runtime);
          }
        }
      } catch (error) {
        context.log({ level: 'warn', message: 'webhook fan-out failed', error });
      }
      if (!stopped) await sleep(runtime.pollMs);
    }
    if (leader) await releaseLease(context.db, FANOUT_LEASE, runner).catch(() => {});
  })();

  // Attempts run side by side, up to IN_FLIGHT: a slow endpoint holds one slot, not the loop.
  const inFlight = new Set<Promise<void>>();
  // The claims of attempts in flight are renewed at a third of their lease, so an attempt may take
  // longer than the lease and still no other replica takes it over while this one lives.
  const held = new Set<string>();
  const renewal = setInterval(() => {
    if (held.size === 0) return;
    renewClaims(context, runtime, runner, [...held]).catch((error) =>
      context.log({ level: 'warn', message: 'renewing webhook delivery claims failed', error }),
    );
  }, runtime.leaseMs / 3);
  const deliver = (async () => {
    while (!stopped) {
      let claimed: Claimed[] = [];
      const free = IN_FLIGHT - inFlight.size;
      try {
        if (free > 0) claimed = await claimDeliveries(context, runtime, runner, Math.min(free, CLAIM_BATCH));
      } catch (error) {
        context.log({ level: 'warn', message: 'webhook delivery loop failed', error });
      }
      for (const c of claimed) {
        held.add(c.id);
        const attempt: Promise<void> = attemptDelivery(context, runtime, runner, c)
          .then(() => undefined)
          .catch((error) =>
            context.log({ level: 'warn', message: `webhook delivery ${c.id} was not recorded`, error }),
          )
          .finally(() => {
            held.delete(c.id);
            inFlight.delete(attempt);
            wakeDelivery?.();
          });
        inFlight.add(attempt);
      }
      // A full batch with free slots left: there may be more due now.
      if (!stopped && (claimed.length < CLAIM_BATCH || inFlight.size >= IN_FLIGHT))
        await new Promise<void>((resolve) => {
          wakeDelivery = resolve;
          void sleep(runtime.pollMs).then(resolve);
        });
    }
    await Promise.all(inFlight);
    clearInterval(renewal);
  })();

  return {
    async stop() {
      stopped = true;
      for (const wake of [...sleepers]) wake();
      wakeDelivery?.();
      await Promise.all([fanOut, deliver]);
    },
  };
}
