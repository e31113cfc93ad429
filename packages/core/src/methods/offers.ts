/**
 * The `offers` group: pools other tenants offered to the acting tenant. An offer from a tenant other
 * than the platform waits until an administrator here accepts it; only then is the pool in
 * `pools list` and open to reservations.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idOf, isoTime, pageOf, tenantId } from './common.js';
import { poolClass } from './pools.js';

const offerSchema = z.object({
  poolId: z.string(),
  poolName: z.string(),
  /** The tenant that owns the pool and made the offer. */
  ownerTenantId: z.string(),
  class: poolClass,
  state: z.enum(['pending', 'accepted']),
  /** When it was offered (pending) or accepted. */
  since: isoTime,
});

const offersList = method({
  kind: 'query',
  summary: 'Pools offered to the tenant: pending offers to accept, and accepted ones',
  tenantScoped: true,
  input: z
    .object({
      tenantId,
      state: z
        .enum(['pending', 'accepted'])
        .optional()
        .describe('Only offers in this state; both when omitted'),
    })
    .strict(),
  output: pageOf(offerSchema),
});

const answer = z.object({ poolId: z.string(), state: z.enum(['accepted', 'declined']) });

const offersAccept = method({
  kind: 'mutation',
  summary: 'Accept a pool’s offer: the pool joins the tenant’s list and takes its reservations',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
  input: z.object({ tenantId, poolId: idOf('pool') }).strict(),
  output: answer,
});

const offersDecline = method({
  kind: 'mutation',
  summary: 'Decline a pending offer of a pool',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
  input: z.object({ tenantId, poolId: idOf('pool') }).strict(),
  output: answer,
});

/** Actions: compute:offers:read, compute:offers:accept, compute:offers:decline. */
export const offersGroup = defineGroup(
  'offers',
  { module: 'fleet' },
  { list: offersList, accept: offersAccept, decline: offersDecline },
);
