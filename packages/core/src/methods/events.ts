/** The `events` group: the tenant's outbox, paged by position. */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { pageInput, pageOf, tenantId } from './common.js';

export const eventSchema = z.object({
  id: z.string(),
  /** The outbox position in the list form, `184467:12`. */
  position: z.string(),
  type: z.string(),
  tenantId: z.string(),
  subject: z.object({ type: z.string(), id: z.string().nullable() }),
  data: z.record(z.string(), z.unknown()),
  actor: z.string().nullable(),
  requestId: z.string().nullable(),
  occurredAt: z.string(),
});

/**
 * What `type` takes: one event type (at least two dotted words), or a prefix of dotted words
 * ending with `.` or `.*`. Anything else (`node*`, `*`, `.`, `node..`, `node.*.changed`) would
 * match no event, so it is refused rather than answered with an empty page; so is an empty type,
 * which a script's unset variable gives and which must not quietly mean every event.
 */
const TYPE_FILTER = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.(\*|[A-Za-z0-9_-]+)?$/;

const eventsList = method({
  kind: 'query',
  summary: 'Page through the tenant’s events in commit order',
  tenantScoped: true,
  input: z
    .object({
      tenantId,
      /** A type (`reservation.created`), or a prefix ending with `.` (`reservation.`) or `.*` (`node.*`). */
      type: z
        .string()
        .max(100, 'must be at most 100 characters')
        .regex(
          TYPE_FILTER,
          'must be an event type like reservation.created, or a prefix ending with . or .* like reservation. or node.*',
        )
        .optional()
        .describe(
          'Only events of this type (reservation.created), or of a prefix ending with . or .* (node.*)',
        ),
      ...pageInput,
    })
    .strict(),
  output: pageOf(eventSchema),
});

/** The `events` group: each method's name, route (`/events/…`) and default IAM action come from here. */
export const eventsGroup = defineGroup(
  'events',
  { module: 'events' },
  {
    list: eventsList,
  },
);
