/**
 * The `webhooks` group: a tenant's subscriptions that receive its events as signed HTTP deliveries
 * (Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature`). The signing secret
 * (`whsec_…`) is answered once, by `create` and `rotateSecret`, and by nothing else.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idempotencyKey, idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';
import { ifVersion } from './sites.js';

/** The longest endpoint URL taken. */
const MAX_WEBHOOK_URL = 2048;
/** How many event type patterns one webhook takes. */
export const MAX_WEBHOOK_PATTERNS = 50;

/**
 * An event type pattern: one type (`reservation.created`) or a prefix of dotted words ending with
 * `.*` (`reservation.*`). Whether the type or prefix names anything in the catalog is the server's
 * check (it knows the catalog); this is the shape.
 */
export const webhookEventPattern = z
  .string()
  .max(100, 'must be at most 100 characters')
  .regex(
    /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.(\*|[A-Za-z0-9_-]+)$/,
    'must be an event type like reservation.created, or a prefix ending with .* like reservation.*',
  );

/** An endpoint URL as sent; what it may point at is the server's check (address-check.ts). */
const webhookUrl = z
  .string()
  .min(1, 'must be the receiver’s URL, like https://hooks.example.com/compute')
  .max(MAX_WEBHOOK_URL, `must be at most ${MAX_WEBHOOK_URL} characters`);

const description = z
  .string()
  .max(500, 'must be at most 500 characters')
  .refine((text) => !/[\u0000-\u001f\u007f-\u009f]/.test(text), 'must not contain control characters');

export const webhookSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  url: z.string(),
  events: z.array(z.string()),
  description: z.string(),
  enabled: z.boolean(),
  /** Why it is disabled, when the server disabled it (an endpoint failing for days). */
  disabledReason: z.string().nullable(),
  /** Since when every attempt has failed; null while the endpoint answers. */
  failingSince: isoTime.nullable(),
  /** Until when deliveries carry the previous secret's signature as well, after a rotation. */
  previousSecretExpiresAt: isoTime.nullable(),
  version: z.number().int(),
  createdAt: isoTime,
  updatedAt: isoTime,
});

/** A webhook with its signing secret: the one answer that shows it. */
const webhookWithSecret = z.object({ webhook: webhookSchema, secret: z.string() });

const webhookAttemptSchema = z.object({
  attempt: z.number().int(),
  at: isoTime,
  /** The HTTP status answered; null when none was (refused address, timeout, connection error). */
  statusCode: z.number().int().nullable(),
  durationMs: z.number().int(),
  success: z.boolean(),
  error: z.string().nullable(),
  /** The first bytes of the answer (at most 1 KiB), control characters replaced. */
  responseExcerpt: z.string().nullable(),
});

export const webhookDeliverySchema = z.object({
  id: z.string(),
  webhookId: z.string(),
  eventId: z.string().nullable(),
  eventType: z.string(),
  state: z.enum(['pending', 'succeeded', 'failed']),
  attempts: z.number().int(),
  nextAttemptAt: isoTime.nullable(),
  createdAt: isoTime,
  finishedAt: isoTime.nullable(),
  /** The latest attempts, newest last (at most 20). */
  attemptLog: z.array(webhookAttemptSchema),
});

const webhookResource = (input: { webhookId: string }) => ({ type: 'compute-webhook', id: input.webhookId });
const ref = { tenantId, webhookId: idOf('webhook') };

const webhooksList = method({
  kind: 'query',
  summary: 'List the tenant’s webhooks',
  tenantScoped: true,
  input: z.object({ tenantId, ...pageInputById('webhook') }).strict(),
  output: pageOf(webhookSchema),
});

const webhooksGet = method({
  kind: 'query',
  summary: 'Show a webhook (never its secret)',
  tenantScoped: true,
  resource: webhookResource,
  input: z.object(ref).strict(),
  output: webhookSchema,
});

const webhooksCreate = method({
  kind: 'mutation',
  summary: 'Subscribe an endpoint to event types; answers the signing secret once',
  tenantScoped: true,
  idempotent: true,
  // A retry with the same key gets the same secret back; the kept answer holds it sealed.
  sealed: ['secret'],
  input: z
    .object({
      tenantId,
      url: webhookUrl.describe(
        'The receiver’s HTTPS URL, like https://hooks.example.com/compute (up to 2,048 characters)',
      ),
      events: z
        .array(webhookEventPattern)
        .min(1, 'must name at least one event type or prefix')
        .max(MAX_WEBHOOK_PATTERNS, `must be at most ${MAX_WEBHOOK_PATTERNS} patterns`)
        .describe('The event types to deliver, like reservation.created or reservation.* (1 to 50)'),
      description: description
        .optional()
        .describe('What the webhook is for, for people (up to 500 characters)'),
      enabled: z.boolean().optional().describe('Whether it delivers; true when omitted'),
      idempotencyKey: idempotencyKey.optional(),
    })
    .strict(),
  output: webhookWithSecret,
});

const webhooksUpdate = method({
  kind: 'mutation',
  summary: 'Change a webhook’s URL, event types, description, or enable or disable it',
  tenantScoped: true,
  resource: webhookResource,
  input: z
    .object({
      ...ref,
      url: webhookUrl.optional().describe('The new receiver URL (up to 2,048 characters)'),
      events: z
        .array(webhookEventPattern)
        .min(1, 'must name at least one event type or prefix')
        .max(MAX_WEBHOOK_PATTERNS, `must be at most ${MAX_WEBHOOK_PATTERNS} patterns`)
        .optional()
        .describe('The event types to deliver, replacing the current ones (1 to 50)'),
      description: description.optional().describe('The new description (up to 500 characters)'),
      enabled: z
        .boolean()
        .optional()
        .describe('Enable or disable deliveries; enabling clears a server-set disabled reason'),
      ifVersion,
    })
    .strict(),
  output: webhookSchema,
});

const webhooksDelete = method({
  kind: 'mutation',
  summary: 'Delete a webhook and its deliveries',
  tenantScoped: true,
  resource: webhookResource,
  input: z.object({ ...ref, ifVersion }).strict(),
  output: z.object({ id: z.string(), deleted: z.literal(true) }),
});

const webhooksPing = method({
  kind: 'mutation',
  summary: 'Send a webhook.ping test delivery now, through the usual delivery path',
  tenantScoped: true,
  resource: webhookResource,
  input: z.object(ref).strict(),
  output: webhookDeliverySchema,
});

const webhooksRotateSecret = method({
  kind: 'mutation',
  summary: 'Give a webhook a new signing secret (answered once); the old one still signs for 24 hours',
  // IAM action names are lower case: the method's name in kebab case, as its command is named.
  access: { action: 'compute:webhooks:rotate-secret' },
  tenantScoped: true,
  resource: webhookResource,
  input: z.object({ ...ref, ifVersion }).strict(),
  output: webhookWithSecret,
});

const webhooksDeliveries = method({
  kind: 'query',
  summary: 'A webhook’s deliveries with their attempts, newest first',
  tenantScoped: true,
  resource: webhookResource,
  input: z
    .object({
      ...ref,
      state: z
        .enum(['pending', 'succeeded', 'failed'])
        .optional()
        .describe('Only deliveries in this state; all when omitted'),
      ...pageInputById('webhookDelivery'),
    })
    .strict(),
  output: pageOf(webhookDeliverySchema),
});

const webhooksRedeliver = method({
  kind: 'mutation',
  summary: 'Queue one delivery again, now, with its original id and body',
  tenantScoped: true,
  resource: webhookResource,
  input: z.object({ ...ref, deliveryId: idOf('webhookDelivery') }).strict(),
  output: webhookDeliverySchema,
});

const webhooksEventTypes = method({
  kind: 'query',
  summary: 'The event types a webhook can subscribe to',
  tenantScoped: true,
  input: z.object({ tenantId }).strict(),
  output: z.object({
    items: z.array(z.object({ type: z.string(), subject: z.string(), summary: z.string() })),
  }),
});

/** The `webhooks` group: each method's name, route (`/webhooks/…`) and default IAM action come from here. */
export const webhooksGroup = defineGroup(
  'webhooks',
  { module: 'events' },
  {
    list: webhooksList,
    get: webhooksGet,
    create: webhooksCreate,
    update: webhooksUpdate,
    delete: webhooksDelete,
    ping: webhooksPing,
    rotateSecret: webhooksRotateSecret,
    deliveries: webhooksDeliveries,
    redeliver: webhooksRedeliver,
    eventTypes: webhooksEventTypes,
  },
);
