/**
 * The `reservations` group: GPUs of a pool for a time. A reservation is `queued` until GPUs are
 * free for it, `active` while it holds them (its `binding`: nodes and GPU indices), and `ended`
 * with a reason (`released`, `expired`, `cancelled`, `node-retired`).
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idempotencyKey, idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';
import { ifVersion, labelKey, SYSTEM_TAINT_PREFIX } from './sites.js';

export const MAX_RESERVATION_SECONDS = 30 * 86_400;

export const reservationState = z.enum(['queued', 'active', 'ended']);
export const endReason = z.enum(['released', 'expired', 'cancelled', 'node-retired']);

export const bindingSchema = z.object({
  nodeId: z.string(),
  gpuIndices: z.array(z.number().int()),
  nvlinkDomain: z.string().nullable(),
  gpuModel: z.string(),
  gpuProduct: z.string(),
  /** The node's state now: `offline` here means the reservation's GPUs are unreachable. */
  nodeState: z.string(),
});

export const reservationSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  poolId: z.string(),
  projectId: z.string().nullable(),
  state: reservationState,
  gpus: z.number().int(),
  durationSeconds: z.number().int(),
  nvlink: z.boolean(),
  selector: z.string().nullable(),
  gpuModel: z.string().nullable(),
  gpuProduct: z.string().nullable(),
  tolerations: z.array(z.string()),
  /** `degraded` while a node it is bound to is offline. */
  health: z.enum(['ok', 'degraded']),
  /** 1 for the next to start, while queued. */
  queuePosition: z.number().int().nullable(),
  createdAt: isoTime,
  activatedAt: isoTime.nullable(),
  endsAt: isoTime.nullable(),
  endedAt: isoTime.nullable(),
  endReason: endReason.nullable(),
  binding: z.array(bindingSchema),
  version: z.number().int(),
  /** The person or service account it belongs to (null for one made before owners were kept). */
  ownerId: z.string().nullable(),
  /** The agent that made it for its owner, when one did. */
  agentId: z.string().nullable(),
});

/** What a reservation asks for; `capacity.preview` takes the same. */
export const placementRequest = {
  poolId: idOf('pool'),
  gpus: z.number().int().min(1).max(4096).describe('How many GPUs to reserve'),
  durationSeconds: z
    .number()
    .int()
    .min(60)
    .max(MAX_RESERVATION_SECONDS)
    .describe('How long the GPUs are held once bound, in seconds'),
  /** Every GPU in one NVLink domain (which may span several nodes). */
  nvlink: z
    .boolean()
    .default(false)
    .describe('Every GPU in one NVLink domain (which may span several nodes)'),
  /** `gpuProduct in (H100-SXM5-80GB), vramGiB >= 80`: comma is and. */
  selector: z
    .string()
    .max(1000)
    .optional()
    .describe(
      'Which nodes may serve it, like `gpuProduct in (H100-SXM5-80GB), vramGiB >= 80` (comma is and)',
    ),
  gpuModel: z.string().max(64).optional().describe('Only GPUs of this model, like H100'),
  gpuProduct: z.string().max(64).optional().describe('Only GPUs of this product, like H100-SXM5-80GB'),
  /** Taint keys whose NoSchedule this reservation tolerates; never compute's own, which guard placement. */
  tolerations: z
    .array(
      labelKey.refine((key) => !key.startsWith(SYSTEM_TAINT_PREFIX), {
        message: `must not be one of compute's own taints (${SYSTEM_TAINT_PREFIX}…), which keep work off a node until it is safe`,
      }),
    )
    .max(16)
    .default([])
    .describe('Taint keys whose NoSchedule this reservation tolerates (never compute’s own)'),
};

const reservationsCreate = method({
  kind: 'mutation',
  summary: 'Reserve GPUs from a pool; queued in order when they are not free',
  tenantScoped: true,
  idempotent: true,
  claimsWithFirstStatement: true,
  input: z
    .object({
      tenantId,
      ...placementRequest,
      projectId: idOf('project').optional(),
      idempotencyKey: idempotencyKey.optional(),
    })
    .strict(),
  output: reservationSchema,
});

const reservationsGet = method({
  kind: 'query',
  summary: 'Show a reservation with its binding',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-reservation', id: input.reservationId }),
  input: z.object({ tenantId, reservationId: idOf('reservation') }).strict(),
  output: reservationSchema,
});

const reservationsList = method({
  kind: 'query',
  summary: 'List the tenant’s reservations, newest first',
  tenantScoped: true,
  input: z
    .object({
      tenantId,
      state: reservationState.optional().describe('Only reservations in this state'),
      poolId: idOf('pool').optional().describe('Only reservations of this pool'),
      /** Only the caller's own (an agent's: its person's). */
      mine: z.boolean().optional().describe('Only the caller’s own (an agent’s: its person’s)'),
      ...pageInputById('reservation'),
    })
    .strict(),
  output: pageOf(reservationSchema),
});

const reservationsExtend = method({
  kind: 'mutation',
  summary: 'Extend a queued or active reservation',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-reservation', id: input.reservationId }),
  input: z
    .object({
      tenantId,
      reservationId: idOf('reservation'),
      bySeconds: z
        .number()
        .int()
        .min(60)
        .max(MAX_RESERVATION_SECONDS)
        .describe('Seconds to add to the reservation’s end'),
      ifVersion,
    })
    .strict(),
  output: reservationSchema,
});

const reservationsRelease = method({
  kind: 'mutation',
  summary: 'Release a reservation’s GPUs now (or cancel it while queued)',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-reservation', id: input.reservationId }),
  input: z.object({ tenantId, reservationId: idOf('reservation'), ifVersion }).strict(),
  output: reservationSchema,
});

/** The `reservations` group: each method's name, route (`/reservations/…`) and default IAM action come from here. */
export const reservationsGroup = defineGroup(
  'reservations',
  { module: 'fleet' },
  {
    create: reservationsCreate,
    get: reservationsGet,
    list: reservationsList,
    extend: reservationsExtend,
    release: reservationsRelease,
  },
);
