/** The `events` group: the tenant's outbox, paged by position. */
import { z } from 'zod';
import { defineMethod } from '../contract.js';
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

export const eventsList = defineMethod({
  group: 'events',
  name: 'list',
  kind: 'query',
  summary: 'Page through the tenant’s events in commit order',
  module: 'events',
  access: { action: 'compute:events:read' },
  tenantScoped: true,
  input: z
    .object({
      tenantId,
      /** A type, or a prefix ending with `.` (`reservation.`) or `.*`. */
      type: z.string().max(100).optional(),
      ...pageInput,
    })
    .strict(),
  output: pageOf(eventSchema),
});
