/** The `quotas` group: limits per tenant, pool and resource, enforced at reserve and at activation. */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idOf, isoTime, tenantId } from './common.js';
import { ifVersion } from './sites.js';

/** `gpus`: GPUs held at once (queued and active at reserve, active at activation); `reservations`: reservations held at once. */
const quotaResource = z.enum(['gpus', 'reservations']);

const quotaSchema = z.object({
  tenantId: z.string(),
  poolId: z.string(),
  resource: quotaResource,
  /** Null when no limit is set. */
  limit: z.number().int().nullable(),
  /** What the tenant holds now: queued and active. */
  used: z.number().int(),
  version: z.number().int(),
  updatedAt: isoTime.nullable(),
});

const quotasGet = method({
  kind: 'query',
  summary: 'Show a tenant’s quotas on a pool',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
  // No namesTenants here: the method refuses a caller who is not the pool's owner before it asks
  // whether the subject exists, so a stranger cannot learn which tenants there are (issue 15).
  input: z
    .object({
      tenantId,
      poolId: idOf('pool'),
      /** The tenant the quota limits; the acting tenant when absent. A pool's owner may read any tenant's. */
      subjectTenantId: tenantId.optional(),
    })
    .strict(),
  output: z.object({ items: z.array(quotaSchema), nextCursor: z.null() }),
});

const quotasSet = method({
  kind: 'mutation',
  summary:
    'Set (or clear, with limit null) a tenant’s quota on a pool the acting tenant owns (an archived pool’s can only be cleared)',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
  namesTenants: ['subjectTenantId'],
  input: z
    .object({
      tenantId,
      poolId: idOf('pool'),
      subjectTenantId: tenantId,
      resource: quotaResource
        .default('gpus')
        .describe(
          'What the quota counts: gpus (GPUs held at once) or reservations (reservations held at once)',
        ),
      limit: z
        .number()
        .int()
        .min(0)
        .max(1_000_000)
        .nullable()
        .describe('The most the tenant may hold (0 to 1,000,000), or null to clear the quota'),
      ifVersion,
    })
    .strict(),
  output: quotaSchema,
});

/** The `quotas` group: each method's name, route (`/quotas/…`) and default IAM action come from here. */
export const quotasGroup = defineGroup(
  'quotas',
  { module: 'fleet' },
  {
    get: quotasGet,
    set: quotasSet,
  },
);
