/** The `usage` group: GPU-seconds per tenant, pool and GPU model in hour windows, and a billing export. */
import { z } from 'zod';
import { defineMethod } from '../contract.js';
import { idOf, pageInput, pageOf, tenantId } from './common.js';

export const usageRowSchema = z.object({
  windowStart: z.string(),
  windowEnd: z.string(),
  tenantId: z.string(),
  poolId: z.string(),
  gpuModel: z.string(),
  gpuSeconds: z.number().int(),
});

const usageFilter = {
  tenantId,
  poolId: idOf('pool').optional(),
  /** Start of the first hour (rounded down); default 24 hours before `to`. */
  from: z.iso.datetime({ offset: true }).optional(),
  /** End (exclusive); default now. */
  to: z.iso.datetime({ offset: true }).optional(),
};

export const usageList = defineMethod({
  group: 'usage',
  name: 'list',
  kind: 'query',
  summary:
    'GPU-seconds per tenant, pool and GPU model, per hour (the tenant’s own, and all tenants’ on pools it owns)',
  module: 'fleet',
  access: { action: 'compute:usage:read' },
  tenantScoped: true,
  input: z.object({ ...usageFilter, ...pageInput }).strict(),
  output: pageOf(usageRowSchema),
});

export const usageExport = defineMethod({
  group: 'usage',
  name: 'export',
  kind: 'query',
  summary: 'Usage windows as CSV or JSON lines, returned in the answer',
  module: 'fleet',
  access: { action: 'compute:usage:export' },
  tenantScoped: true,
  input: z.object({ ...usageFilter, format: z.enum(['csv', 'jsonl']).default('csv') }).strict(),
  output: z.object({
    format: z.enum(['csv', 'jsonl']),
    contentType: z.string(),
    rows: z.number().int(),
    content: z.string(),
  }),
});
