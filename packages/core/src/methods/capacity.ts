/** The `capacity` group: GPUs per pool and model, and whether (and when) a request would fit. */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idOf, isoTime, tenantId } from './common.js';
import { bindingSchema, placementRequest } from './reservations.js';

const counts = {
  total: z.number().int(),
  reserved: z.number().int(),
  free: z.number().int(),
  /** On nodes that take no new work (joining, cordoned, draining, drained, offline) and not reserved. */
  unavailable: z.number().int(),
};

const capacityPoolSchema = z.object({
  poolId: z.string(),
  name: z.string(),
  class: z.string(),
  ...counts,
  queuedReservations: z.number().int(),
  queuedGpus: z.number().int(),
  models: z.array(z.object({ gpuModel: z.string(), ...counts })),
});

const capacityGet = method({
  kind: 'query',
  summary: 'Total, reserved, free and unavailable GPUs per pool and per GPU model',
  tenantScoped: true,
  input: z.object({ tenantId, poolId: idOf('pool').optional() }).strict(),
  output: z.object({ items: z.array(capacityPoolSchema), nextCursor: z.null() }),
});

const capacityPreview = method({
  kind: 'query',
  summary: 'Whether a reservation would fit now and where; if not, the earliest time it could start',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
  input: z.object({ tenantId, ...placementRequest }).strict(),
  output: z.object({
    fits: z.boolean(),
    /** Where it would be placed now, when it fits. */
    placement: z.array(bindingSchema.omit({ nodeState: true })).nullable(),
    /** Now when it fits; else when running reservations have ended enough; null when it cannot start on the nodes there are. */
    earliestStartAt: isoTime.nullable(),
    /** Reservations queued ahead in the pool. */
    queuedAhead: z.number().int(),
    reason: z.string().nullable(),
  }),
});

/** The `capacity` group: each method's name, route (`/capacity/…`) and default IAM action come from here. */
export const capacityGroup = defineGroup(
  'capacity',
  { module: 'fleet' },
  {
    get: capacityGet,
    preview: capacityPreview,
  },
);
