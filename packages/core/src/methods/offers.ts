/**
 * The `offers` group: pools other tenants offered to the acting tenant. An offer from a tenant other
 * than the platform waits until an administrator here accepts it; only then is the pool in
 * `pools list` and open to reservations.
 */
import { z } from 'zod';
import { defineMethod } from '../contract.js';
import { idOf, isoTime, pageOf, tenantId } from './common.js';
import { poolClass } from './pools.js';

export const offerSchema = z.object({
  poolId: z.string(),
  poolName: z.string(),
  /** The tenant that owns the pool and made the offer. */
  ownerTenantId: z.string(),
  class: poolClass,
  state: z.enum(['pending', 'accepted']),
  /** When it was offered (pending) or accepted. */
  since: isoTime,
});

export const offersList = defineMethod({
  group: 'offers',
  name: 'list',
  kind: 'query',
  summary: 'Pools offered to the tenant: pending offers to accept, and accepted ones',
  module: 'fleet',
  access: { action: 'compute:offers:read' },
  tenantScoped: true,
  input: z.object({ tenantId, state: z.enum(['pending', 'accepted']).optional() }).strict(),
  output: pageOf(offerSchema),
});

const answer = z.object({ poolId: z.string(), state: z.enum(['accepted', 'declined']) });

export const offersAccept = defineMethod({
  group: 'offers',
  name: 'accept',
  kind: 'mutation',
  summary: 'Accept a pool’s offer: the pool joins the tenant’s list and takes its reservations',
  module: 'fleet',
  access: { action: 'compute:offers:accept' },
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
  input: z.object({ tenantId, poolId: idOf('pool') }).strict(),
  output: answer,
});

export const offersDecline = defineMethod({
  group: 'offers',
  name: 'decline',
  kind: 'mutation',
  summary: 'Decline a pending offer of a pool',
  module: 'fleet',
  access: { action: 'compute:offers:decline' },
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
  input: z.object({ tenantId, poolId: idOf('pool') }).strict(),
  output: answer,
});
