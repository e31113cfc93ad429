/** The `pools` group: pools of machines at a site, with a class and an owner, offered to other tenants. */
import { z } from 'zod';
import { defineMethod } from '../contract.js';
import { idempotencyKey, idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';
import { ifVersion, labelKey, labels, resourceName } from './sites.js';

export const poolClass = z.enum(['gpu', 'vps', 'metal']);

export const poolSchema = z.object({
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

export const poolsList = defineMethod({
  group: 'pools',
  name: 'list',
  kind: 'query',
  summary: 'List the tenant’s own pools and the pools offered to it',
  module: 'fleet',
  access: { action: 'compute:pools:read' },
  tenantScoped: true,
  input: z
    .object({
      tenantId,
      class: poolClass.optional(),
      includeArchived: z.boolean().default(false),
      ...pageInputById('pool'),
    })
    .strict(),
  output: pageOf(poolSchema),
});

export const poolsGet = defineMethod({
  group: 'pools',
  name: 'get',
  kind: 'query',
  summary: 'Show a pool',
  module: 'fleet',
  access: { action: 'compute:pools:read' },
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
  input: z.object({ tenantId, poolId: idOf('pool') }).strict(),
  output: poolSchema,
});

export const poolsCreate = defineMethod({
  group: 'pools',
  name: 'create',
  kind: 'mutation',
  summary: 'Create a pool at a site',
  module: 'fleet',
  access: { action: 'compute:pools:create' },
  tenantScoped: true,
  idempotent: true,
  input: z
    .object({
      tenantId,
      siteId: idOf('site'),
      name: resourceName,
      class: poolClass.default('gpu'),
      driver: z.string().min(1).max(40).default('bcd'),
      description: z.string().max(1000).optional(),
      labels: labels.optional(),
      idempotencyKey: idempotencyKey.optional(),
    })
    .strict(),
  output: poolSchema,
});

export const poolsUpdate = defineMethod({
  group: 'pools',
  name: 'update',
  kind: 'mutation',
  summary: 'Rename, describe or relabel a pool',
  module: 'fleet',
  access: { action: 'compute:pools:update' },
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
  input: z
    .object({
      tenantId,
      poolId: idOf('pool'),
      name: resourceName.optional(),
      description: z.string().max(1000).optional(),
      /** Replace the pool's labels. */
      labels: labels.optional(),
      /** Label keys to remove (after `labels`, when given, replaced them); a key it lacks is no change. */
      removeLabels: z.array(labelKey).max(64).optional(),
      ifVersion,
    })
    .strict(),
  output: poolSchema,
});

export const poolsArchive = defineMethod({
  group: 'pools',
  name: 'archive',
  kind: 'mutation',
  summary:
    'Archive a pool: it takes no new reservations and no new nodes; its join tokens are revoked and their pending join requests rejected',
  module: 'fleet',
  access: { action: 'compute:pools:archive' },
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
  input: z.object({ tenantId, poolId: idOf('pool'), ifVersion }).strict(),
  output: poolSchema,
});

export const poolsOffer = defineMethod({
  group: 'pools',
  name: 'offer',
  kind: 'mutation',
  summary:
    'Offer an active pool to another tenant: the platform’s offers stand at once, others wait for the tenant to accept (offers.accept)',
  module: 'fleet',
  access: { action: 'compute:pools:offer' },
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
  namesTenants: ['offerTenantId'],
  input: z.object({ tenantId, poolId: idOf('pool'), offerTenantId: tenantId, ifVersion }).strict(),
  output: poolSchema,
});

export const poolsUnoffer = defineMethod({
  group: 'pools',
  name: 'unoffer',
  kind: 'mutation',
  summary:
    'Withdraw a pool’s offer from a tenant (its running reservations run to their end; not offered: no change)',
  module: 'fleet',
  access: { action: 'compute:pools:unoffer' },
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
  input: z.object({ tenantId, poolId: idOf('pool'), offerTenantId: tenantId, ifVersion }).strict(),
  output: poolSchema,
});
