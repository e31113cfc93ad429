/**
 * A webhook's deliveries as its owner reads and steers them: the page of deliveries with their
 * latest attempts, `redeliver` (one delivery again, same id and body), and `ping` (a test event
 * through the outbox and the same fan-out and delivery path as any other).
 */
import { ComputeError, newId } from '@better-compute/core';
import { sql } from 'kysely';
import type { CallContext } from '../define-module.js';
import { loadWebhook } from './subscriptions.js';
import { type AttemptRow, type DeliveryRow, webhooksDb } from './tables.js';

/** How many attempts a delivery's view carries, the latest. */
const ATTEMPTS_SHOWN = 20;

const iso = (value: Date | string) => new Date(value).toISOString();
const isoOrNull = (value: Date | string | null) => (value === null ? null : iso(value));

type DeliveryFields = Pick<
  DeliveryRow,
  'id' | 'webhook_id' | 'event_type' | 'state' | 'attempts' | 'next_attempt_at' | 'created_at' | 'finished_at'
> & { event_id: string | null };

function deliveryView(row: DeliveryFields, attempts: readonly AttemptRow[]) {
  return {
    id: row.id,
    webhookId: row.webhook_id,
    eventId: row.event_id,
    eventType: row.event_type,
    state: row.state,
    attempts: row.attempts,
    nextAttemptAt: row.state === 'pending' ? isoOrNull(row.next_attempt_at) : null,
    createdAt: iso(row.created_at),
    finishedAt: isoOrNull(row.finished_at),
    attemptLog: attempts.map((a) => ({
      attempt: a.attempt,
      at: iso(a.at),
      statusCode: a.status_code,
      durationMs: a.duration_ms,
      success: a.success,
      error: a.error,
      responseExcerpt: a.response_excerpt,
    })),
  };
}

/** The latest attempts of each delivery, oldest first. */
async function attemptsOf(ctx: CallContext, ids: readonly string[]): Promise<Map<string, AttemptRow[]>> {
  const byDelivery = new Map<string, AttemptRow[]>(ids.map((id) => [id, []]));
  if (ids.length === 0) return byDelivery;
  // Raw SQL: Kysely has no builder for a window in a subquery's filter.
  const { rows } = await sql<AttemptRow>`
    select delivery_id, attempt, runner, at, status_code, duration_ms, success, error, response_excerpt
    from (
      select *, row_number() over (partition by delivery_id order by attempt desc) as rank
      from compute.webhook_attempts where delivery_id = any(${sql.val([...ids])}::text[])
    ) latest
    where rank <= ${ATTEMPTS_SHOWN}
    order by delivery_id, attempt`.execute(ctx.db);
  for (const row of rows) byDelivery.get(row.delivery_id)?.push(row);
  return byDelivery;
}

export async function listDeliveries(
  ctx: CallContext<{
    webhookId: string;
    state?: 'pending' | 'succeeded' | 'failed' | undefined;
    limit: number;
    cursor?: string | undefined;
  }>,
) {
  const webhook = await loadWebhook(ctx, ctx.input.webhookId);
  let query = webhooksDb(ctx.db)
    .selectFrom('compute.webhook_deliveries')
    .selectAll()
    .where('webhook_id', '=', webhook.id);
  if (ctx.input.state) query = query.where('state', '=', ctx.input.state);
  if (ctx.input.cursor) query = query.where('id', '<', ctx.input.cursor);
  const rows = await query
    .orderBy('id', 'desc')
    .limit(ctx.input.limit + 1)
    .execute();
  const page = rows.slice(0, ctx.input.limit);
  const attempts = await attemptsOf(
    ctx,
    page.map((r) => r.id),
  );
  return {
    items: page.map((row) => deliveryView(row, attempts.get(row.id) ?? [])),
    nextCursor: rows.length > ctx.input.limit ? (page.at(-1)?.id ?? null) : null,
  };
}

function refuseDisabled(webhook: { id: string; enabled: boolean }, what: string): void {
  if (!webhook.enabled)
    throw new ComputeError('INVALID_STATE', `webhook ${webhook.id} is disabled; ${what}`, {
      details: { id: webhook.id, enabled: false },
      hint: `Enable it first: better-compute webhooks update ${webhook.id} --enable.`,
    });
}

export async function redeliver(ctx: CallContext<{ webhookId: string; deliveryId: string }>) {
  const webhook = await loadWebhook(ctx, ctx.input.webhookId);
  refuseDisabled(webhook, 'a disabled webhook is sent nothing');
  const db = webhooksDb(ctx.db);
  const current = await db
    .selectFrom('compute.webhook_deliveries')
    .selectAll()
    .where('id', '=', ctx.input.deliveryId)
    .where('webhook_id', '=', webhook.id)
    .forUpdate()
    .executeTakeFirst();
  if (!current)
    throw new ComputeError(
      'NOT_FOUND',
      `delivery ${ctx.input.deliveryId} of webhook ${webhook.id} does not exist`,
      {
        details: { id: ctx.input.deliveryId },
        hint: `List its deliveries with better-compute webhooks deliveries ${webhook.id}.`,
      },
    );
  const now = ctx.now();
  // Due now, with the whole retry schedule again. A claim in flight keeps its lease: its outcome
  // is recorded, and a failure then waits for the first retry's delay.
  const row = await db
    .updateTable('compute.webhook_deliveries')
    .set({ state: 'pending', schedule_step: 0, next_attempt_at: now, finished_at: null })
    .where('id', '=', current.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  const attempts = await attemptsOf(ctx, [row.id]);
  return deliveryView(row, attempts.get(row.id) ?? []);
}

/**
 * Writes a `webhook.ping` event naming this webhook and the delivery id it will have; the fan-out
 * turns it into that one delivery (no other webhook receives it), sent as soon as a sinks replica
 * picks it up.
 */
export async function ping(ctx: CallContext<{ webhookId: string }>) {
  const webhook = await loadWebhook(ctx, ctx.input.webhookId);
  refuseDisabled(webhook, 'a disabled webhook is sent nothing, pings included');
  const deliveryId = newId('webhookDelivery');
  ctx.emit({
    type: 'webhook.ping',
    subject: { type: 'webhook', id: webhook.id },
    data: { webhookId: webhook.id, deliveryId },
  });
  const now = ctx.now();
  return deliveryView(
    {
      id: deliveryId,
      webhook_id: webhook.id,
      event_id: null,
      event_type: 'webhook.ping',
      state: 'pending',
      attempts: 0,
      next_attempt_at: now,
      created_at: now,
      finished_at: null,
    },
    [],
  );
}
