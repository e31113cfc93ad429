/**
 * The `usage` group: GPU-seconds per tenant, pool and GPU model in hour windows, and a billing
 * export. `from` and `to` are used as given: each window is its hour clipped to [from, to), and
 * windowStart and windowEnd say the clipped bounds (docs/decisions/usage-paging.md).
 */
import { z } from 'zod';
import { defineMethod } from '../contract.js';
import { idOf, pageInput, pageOf, tenantId } from './common.js';

export const usageRowSchema = z.object({
  /** The window's start: its hour's, or `from` in the hour `from` falls in. */
  windowStart: z.string(),
  /** The window's end (exclusive): its hour's, or `to` in the hour `to` falls in. */
  windowEnd: z.string(),
  tenantId: z.string(),
  poolId: z.string(),
  gpuModel: z.string(),
  gpuSeconds: z.number().int(),
});

const usageFilter = {
  tenantId,
  poolId: idOf('pool').optional(),
  /** Start (inclusive), used as given; default 24 hours before `to`. */
  from: z.iso.datetime({ offset: true }).optional(),
  /** End (exclusive), used as given; default now. */
  to: z.iso.datetime({ offset: true }).optional(),
};

/**
 * The list's cursor is opaque (the last row's sort key, encoded) and can be longer than the 200
 * characters of `pageInput`; the service refuses anything it did not give, naming the cursor.
 */
const usagePageInput = { limit: pageInput.limit, cursor: z.string().min(1).optional() };

export const usageList = defineMethod({
  group: 'usage',
  name: 'list',
  kind: 'query',
  summary:
    'GPU-seconds per tenant, pool and GPU model, per hour (the tenant’s own, and all tenants’ on pools it owns)',
  module: 'fleet',
  access: { action: 'compute:usage:read' },
  tenantScoped: true,
  input: z.object({ ...usageFilter, ...usagePageInput }).strict(),
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
