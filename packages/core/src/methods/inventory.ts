/** The `inventory` group: a node's hardware inventory (GPUs with their NVLink domains, CPU, memory) and its history. */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idOf, isoTime, pageInputByRevision, pageOf, revisionNumber, tenantId } from './common.js';

/** One GPU as the node daemon reports it. A domain id may be shared by GPUs of several nodes (rack-scale NVLink). */
export const gpuInventorySchema = z
  .object({
    index: z.number().int().min(0).max(255),
    model: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'must be a GPU model like H100'),
    product: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'must be a product like H100-SXM5-80GB'),
    vramGiB: z.number().int().min(1).max(4096),
    nvlinkDomain: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/, 'must be an NVLink domain id')
      .nullable()
      .default(null),
  })
  .strict();

export const inventorySchema = z
  .object({
    cpuCores: z.number().int().min(1).max(4096),
    memoryGiB: z.number().int().min(1).max(1_048_576),
    gpus: z
      .array(gpuInventorySchema)
      .max(256)
      .refine((gpus) => new Set(gpus.map((g) => g.index)).size === gpus.length, 'GPU indices must be unique'),
  })
  .strict();

const inventoryRecordSchema = z.object({
  nodeId: z.string(),
  revision: z.number().int(),
  inventory: inventorySchema,
  recordedAt: isoTime,
});

const inventoryGet = method({
  kind: 'query',
  summary: 'A node’s current hardware inventory',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-node', id: input.nodeId }),
  input: z.object({ tenantId, nodeId: idOf('node') }).strict(),
  output: inventoryRecordSchema.extend({
    /** Whether the reported GPUs are in use for placement (a change waits until the node holds no reservation). */
    applied: z.boolean(),
  }),
});

const inventoryHistory = method({
  kind: 'query',
  summary: 'Every inventory a node reported, newest first',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-node', id: input.nodeId }),
  input: z.object({ tenantId, nodeId: idOf('node'), ...pageInputByRevision() }).strict(),
  output: pageOf(inventoryRecordSchema),
});

const inventoryChangeSchema = z.object({
  /** `gpus[3]`, `gpus[3].vramGiB`, `cpuCores`, `memoryGiB`. */
  path: z.string(),
  kind: z.enum(['added', 'removed', 'changed']),
  before: z.unknown(),
  after: z.unknown(),
});

const inventoryDiff = method({
  kind: 'query',
  summary: 'What changed between two inventory revisions (default: the last two)',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-node', id: input.nodeId }),
  input: z
    .object({
      tenantId,
      nodeId: idOf('node'),
      fromRevision: revisionNumber
        .optional()
        .describe('The revision to compare from; the one before toRevision when omitted'),
      toRevision: revisionNumber.optional().describe('The revision to compare to; the latest when omitted'),
    })
    .strict(),
  output: z.object({
    nodeId: z.string(),
    fromRevision: z.number().int(),
    toRevision: z.number().int(),
    changes: z.array(inventoryChangeSchema),
  }),
});

/** The `inventory` group: each method's name, route (`/inventory/…`) and default IAM action come from here. */
export const inventoryGroup = defineGroup(
  'inventory',
  { module: 'fleet' },
  {
    get: inventoryGet,
    history: inventoryHistory,
    diff: inventoryDiff,
  },
);
