/** The `pools` group: pools of machines at a site, with a class and an owner, offered to other tenants. */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idempotencyKey, idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';
import { ifVersion, labelKey, labels, resourceName } from './sites.js';

export const poolClass = z.enum(['gpu', 'vps', 'metal']);

const poolSchema = z.object({
  id: z.string(),
  /** The owner. */
  tenantId: z.string(),
  siteId: z.string(),
  name: z.string(),
  class: poolClass,
  driver: z.string(),
  state: z.enum(['active', 'archived']),
  description: z.string(),
  labels: z.record(z.string(), z.string()),
  /** Tenants that accepted the pool's offer (or were offered it by the platform); shown to its owner only. */
  offeredTo: z.array(z.string()),
  /** Tenants offered the pool that have not accepted yet; shown to its owner only. */
  offerPending: z.array(z.string()),
  /** `owner` or `offered`: how the caller's tenant sees it. */
  access: z.enum(['owner', 'offered']),
  version: z.number().int(),
  createdAt: isoTime,
  updatedAt: isoTime,
});

const poolsList = method({
  kind: 'query',
  summary: 'List the tenant’s own pools and the pools offered to it',
  tenantScoped: true,
  input: z
    .object({
      tenantId,
      class: poolClass.optional().describe('Only pools of this class'),
      name: resourceName.optional().describe('Only the pool of this name'),
      includeArchived: z.boolean().default(false).describe('Also list archived pools'),
      ...pageInputById('pool'),
    })
    .strict(),
  output: pageOf(poolSchema),
});

const poolsGet = method({
  kind: 'query',
  summary: 'Show a pool',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
  input: z.object({ tenantId, poolId: idOf('pool') }).strict(),
  output: poolSchema,
});

const poolsCreate = method({
  kind: 'mutation',
  summary: 'Create a pool at a site',
  tenantScoped: true,
  idempotent: true,
  input: z
    .object({
      tenantId,
      siteId: idOf('site'),
      name: resourceName,
      class: poolClass.default('gpu').describe('What the pool’s machines serve: gpu, vps or metal'),
      driver: z
        .string()
        .min(1)
        .max(40)
        .default('bcd')
        .describe('The driver that runs the pool’s machines (bcd, or a plugin’s)'),
      description: z.string().max(1000).optional().describe('Free text for people'),
      labels: labels.optional(),
      idempotencyKey: idempotencyKey.optional(),
    })
    .strict(),
  output: poolSchema,
});

const poolsUpdate = method({
  kind: 'mutation',
  summary: 'Rename, describe or relabel a pool',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
  input: z
    .object({
      tenantId,
      poolId: idOf('pool'),
      name: resourceName.optional().describe('A new name'),
      description: z.string().max(1000).optional().describe('A new description'),
      /** Replace the pool's labels. */
      labels: labels.optional().describe('Replace the pool’s labels with these'),
      /** Label keys to remove (after `labels`, when given, replaced them); a key it lacks is no change. */
      removeLabels: z
        .array(labelKey)
        .max(64)
        .optional()
        .describe('Label keys to remove, after labels (when given) replaced them'),
      ifVersion,
    })
    .strict(),
  output: poolSchema,
});

const poolsArchive = method({
  kind: 'mutation',
  summary:
    'Archive a pool: it takes no new reservations and no new nodes; its join tokens are revoked and their pending join requests rejected',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
  input: z.object({ tenantId, poolId: idOf('pool'), ifVersion }).strict(),
  output: poolSchema,
});

const poolsOffer = method({
  kind: 'mutation',
  summary:
    'Offer an active pool to another tenant: the platform’s offers stand at once, others wait for the tenant to accept (offers.accept)',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
  namesTenants: ['offerTenantId'],
  input: z
    .object({
      tenantId,
      poolId: idOf('pool'),
      offerTenantId: tenantId.describe('The tenant offered the pool'),
      ifVersion,
    })
    .strict(),
  output: poolSchema,
});

const poolsUnoffer = method({
  kind: 'mutation',
  summary:
    'Withdraw a pool’s offer from a tenant (its running reservations run to their end; not offered: no change)',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
  input: z
    .object({
      tenantId,
      poolId: idOf('pool'),
      offerTenantId: tenantId.describe('The tenant whose offer is withdrawn'),
      ifVersion,
    })
    .strict(),
  output: poolSchema,
});

/** The `pools` group: each method's name, route (`/pools/…`) and default IAM action come from here. */
export const poolsGroup = defineGroup(
  'pools',
  { module: 'fleet' },
  {
    list: poolsList,
    get: poolsGet,
    create: poolsCreate,
    update: poolsUpdate,
    archive: poolsArchive,
    offer: poolsOffer,
    unoffer: poolsUnoffer,
  },
);
