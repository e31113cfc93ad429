/**
 * Webhook subscriptions: a tenant's endpoints, the event types each takes, and its signing secret
 * (sealed at rest, answered once by create and rotateSecret, never by anything else).
 */
import { ComputeError, newId } from '@better-compute/core';
import { eventTypeList, isEventType } from '@better-compute/events';
import { sql } from 'kysely';
import type { CallContext } from '../define-module.js';
import { checkEndpoint } from './address-check.js';
import { ROTATION_OVERLAP_MS, type WebhookRuntime } from './settings.js';
import { newWebhookSecret } from './signing.js';
import { type WebhookRow, webhooksDb } from './tables.js';

const iso = (value: Date | string) => new Date(value).toISOString();
const isoOrNull = (value: Date | string | null) => (value === null ? null : iso(value));

function webhookView(row: WebhookRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    url: row.url,
    events: row.events,
    description: row.description,
    enabled: row.enabled,
    disabledReason: row.disabled_reason,
    failingSince: isoOrNull(row.failing_since),
    previousSecretExpiresAt: isoOrNull(row.previous_secret_expires_at),
    version: row.version,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

/** NOT_FOUND for a webhook that does not exist or is another tenant's: the same words for both. */
function webhookNotFound(id: string): ComputeError {
  return new ComputeError('NOT_FOUND', `webhook ${id} does not exist`, {
    details: { id },
    hint: 'List your webhooks with better-compute webhooks list.',
  });
}

export async function loadWebhook(
  ctx: CallContext,
  webhookId: string,
  forUpdate = false,
): Promise<WebhookRow> {
  let query = webhooksDb(ctx.db)
    .selectFrom('compute.webhooks')
    .selectAll()
    .where('id', '=', webhookId)
    .where('tenant_id', '=', ctx.tenantId);
  if (forUpdate) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) throw webhookNotFound(webhookId);
  return row;
}

/**
 * The patterns as stored: each an event type of the catalog or a `prefix.*` that covers at least
 * one, duplicates dropped, in the order given.
 */
function checkPatterns(patterns: readonly string[]): string[] {
  const unique = [...new Set(patterns)];
  for (const pattern of unique) {
    const known = pattern.endsWith('.*')
      ? eventTypeList.some((t) => t.type.startsWith(pattern.slice(0, -1)))
      : isEventType(pattern);
    if (!known)
      throw new ComputeError('INVALID_ARGUMENT', `events: ${pattern} names no event type of the catalog`, {
        hint: 'Run better-compute webhooks event-types for the types; a pattern is one type or a prefix ending with .* (reservation.*).',
        details: { field: 'events', pattern },
      });
  }
  return unique;
}

/** Whether an event type is one a webhook's patterns take. */
export function patternsMatch(patterns: readonly string[], type: string): boolean {
  return patterns.some((p) => (p.endsWith('.*') ? type.startsWith(p.slice(0, -1)) : p === type));
}

/** What a webhook event says of an endpoint: its origin and path, never a query that may hold a token. */
function urlForEvents(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`;
}

export async function listWebhooks(ctx: CallContext<{ limit: number; cursor?: string | undefined }>) {
  let query = webhooksDb(ctx.db)
    .selectFrom('compute.webhooks')
    .selectAll()
    .where('tenant_id', '=', ctx.tenantId);
  if (ctx.input.cursor) query = query.where('id', '>', ctx.input.cursor);
  const rows = await query
    .orderBy('id')
    .limit(ctx.input.limit + 1)
    .execute();
  const page = rows.slice(0, ctx.input.limit);
  return {
    items: page.map(webhookView),
    nextCursor: rows.length > ctx.input.limit ? (page.at(-1)?.id ?? null) : null,
  };
}

export async function getWebhook(ctx: CallContext<{ webhookId: string }>) {
  return webhookView(await loadWebhook(ctx, ctx.input.webhookId));
}

export async function createWebhook(
  runtime: WebhookRuntime,
  ctx: CallContext<{
    url: string;
    events: string[];
    description?: string | undefined;
    enabled?: boolean | undefined;
  }>,
) {
  const url = checkEndpoint(ctx.input.url, runtime);
  const events = checkPatterns(ctx.input.events);
  const db = webhooksDb(ctx.db);
  // One creator at a time per tenant, so two concurrent creates cannot both pass the cap.
  await sql`select pg_advisory_xact_lock(hashtextextended(${`webhooks:${ctx.tenantId}`}, 0))`.execute(db);
  const { count } = await db
    .selectFrom('compute.webhooks')
    .select((eb) => eb.fn.countAll<string>().as('count'))
    .where('tenant_id', '=', ctx.tenantId)
    .executeTakeFirstOrThrow();
  if (Number(count) >= runtime.maxPerTenant)
    throw new ComputeError(
      'QUOTA_EXCEEDED',
      `tenant ${ctx.tenantId} has ${count} webhooks, the most this deployment allows (webhooks per tenant: ${runtime.maxPerTenant})`,
      {
        hint: 'Delete a webhook you no longer use, or subscribe an existing one to more event types with webhooks update.',
        details: { limit: 'webhooksPerTenant', max: runtime.maxPerTenant, count: Number(count) },
      },
    );
  const id = newId('webhook');
  const secret = newWebhookSecret();
  const now = ctx.now();
  const row = await db
    .insertInto('compute.webhooks')
    .values({
      id,
      tenant_id: ctx.tenantId,
      url,
      events: JSON.stringify(events),
      description: ctx.input.description ?? '',
      enabled: ctx.input.enabled ?? true,
      disabled_reason: null,
      secret_sealed: runtime.sealer.seal(secret, id),
      previous_secret_sealed: null,
      previous_secret_expires_at: null,
      failing_since: null,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({
    type: 'webhook.created',
    subject: { type: 'webhook', id },
    data: { url: urlForEvents(url), events, enabled: row.enabled },
  });
  return { webhook: webhookView(row), secret };
}

export async function updateWebhook(
  runtime: WebhookRuntime,
  ctx: CallContext<{
    webhookId: string;
    url?: string | undefined;
    events?: string[] | undefined;
    description?: string | undefined;
    enabled?: boolean | undefined;
    ifVersion?: number | undefined;
  }>,
) {
  const { input } = ctx;
  const current = await loadWebhook(ctx, input.webhookId, true);
  checkVersion(current, input.ifVersion);
  const set: Record<string, unknown> = {};
  const changed: string[] = [];
  if (input.url !== undefined) {
    const url = checkEndpoint(input.url, runtime);
    if (url !== current.url) {
      set.url = url;
      changed.push('url');
    }
  }
  if (input.events !== undefined) {
    const events = checkPatterns(input.events);
    if (JSON.stringify(events) !== JSON.stringify(current.events)) {
      set.events = JSON.stringify(events);
      changed.push('events');
    }
  }
  if (input.description !== undefined && input.description !== current.description) {
    set.description = input.description;
    changed.push('description');
  }
  if (input.enabled !== undefined && input.enabled !== current.enabled) {
    set.enabled = input.enabled;
    // Enabled again by a person: the failure window starts over.
    if (input.enabled) Object.assign(set, { disabled_reason: null, failing_since: null });
    changed.push('enabled');
  }
  if (changed.length === 0) return webhookView(current);
  const row = await webhooksDb(ctx.db)
    .updateTable('compute.webhooks')
    .set({ ...set, version: current.version + 1, updated_at: ctx.now() })
    .where('id', '=', current.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({
    type: 'webhook.updated',
    subject: { type: 'webhook', id: row.id },
    data: { version: row.version, changed },
  });
  return webhookView(row);
}

export async function deleteWebhook(ctx: CallContext<{ webhookId: string; ifVersion?: number | undefined }>) {
  const current = await loadWebhook(ctx, ctx.input.webhookId, true);
  checkVersion(current, ctx.input.ifVersion);
  await webhooksDb(ctx.db).deleteFrom('compute.webhooks').where('id', '=', current.id).execute();
  ctx.emit({ type: 'webhook.deleted', subject: { type: 'webhook', id: current.id } });
  return { id: current.id, deleted: true as const };
}

export async function rotateWebhookSecret(
  runtime: WebhookRuntime,
  ctx: CallContext<{ webhookId: string; ifVersion?: number | undefined }>,
) {
  const current = await loadWebhook(ctx, ctx.input.webhookId, true);
  checkVersion(current, ctx.input.ifVersion);
  const secret = newWebhookSecret();
  const now = ctx.now();
  const expiresAt = new Date(now.getTime() + ROTATION_OVERLAP_MS);
  const row = await webhooksDb(ctx.db)
    .updateTable('compute.webhooks')
    .set({
      secret_sealed: runtime.sealer.seal(secret, current.id),
      // The secret being replaced keeps signing for 24 hours; one replaced before is dropped.
      previous_secret_sealed: current.secret_sealed,
      previous_secret_expires_at: expiresAt,
      version: current.version + 1,
      updated_at: now,
    })
    .where('id', '=', current.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({
    type: 'webhook.secret_rotated',
    subject: { type: 'webhook', id: row.id },
    data: { version: row.version, previousSecretExpiresAt: expiresAt.toISOString() },
  });
  return { webhook: webhookView(row), secret };
}

export async function listEventTypes() {
  return { items: eventTypeList.map((t) => ({ type: t.type, subject: t.subject, summary: t.summary })) };
}

function checkVersion(row: WebhookRow, ifVersion: number | undefined): void {
  if (ifVersion !== undefined && ifVersion !== row.version)
    throw new ComputeError('CONFLICT', `webhook ${row.id} is at version ${row.version}, not ${ifVersion}`, {
      details: { id: row.id, version: row.version, ifVersion },
      hint: `Read the webhook again and retry with --if-version ${row.version}.`,
    });
}
