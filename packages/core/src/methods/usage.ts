/**
 * The `usage` group: GPU-seconds per tenant, pool and GPU model in hour windows, and a billing
 * export. `from` and `to` are used as given: each window is its hour clipped to [from, to), and
 * windowStart and windowEnd say the clipped bounds (docs/decisions/usage-paging.md).
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idOf, pageInput, pageOf, tenantId } from './common.js';

const usageRowSchema = z.object({
  /** The window's start: its hour's, or `from` in the hour `from` falls in. */
  windowStart: z.string(),
  /** The window's end (exclusive): its hour's, or `to` in the hour `to` falls in. */
  windowEnd: z.string(),
  tenantId: z.string(),
  poolId: z.string(),
  gpuModel: z.string(),
  gpuSeconds: z.number().int(),
});

/**
 * The billing meters usage is counted in, as `iam setup --meters` creates them in Better IAM: an
 * export's `gpuSeconds` is the quantity of `compute.gpu-seconds`, broken down by its dimensions.
 */
export const USAGE_METERS = [
  {
    name: 'compute.gpu-seconds',
    unit: 'second',
    aggregation: 'sum',
    dimensions: ['tenantId', 'poolId', 'gpuModel'],
    description: 'GPU-seconds of reserved GPUs per tenant, pool and GPU model: usage export gpuSeconds',
  },
] as const satisfies readonly {
  name: string;
  unit: string;
  aggregation: 'sum' | 'max';
  dimensions: readonly string[];
  description: string;
}[];

const usageFilter = {
  tenantId,
  poolId: idOf('pool').optional(),
  /** Start (inclusive), used as given; default 24 hours before `to`. */
  from: z.iso
    .datetime({ offset: true })
    .optional()
    .describe(
      'Start (inclusive), an ISO 8601 time like 2026-01-01T00:00:00Z; 24 hours before to when omitted',
    ),
  /** End (exclusive), used as given; default now. */
  to: z.iso
    .datetime({ offset: true })
    .optional()
    .describe('End (exclusive), an ISO 8601 time like 2026-01-02T00:00:00Z; now when omitted'),
};

/**
 * The list's cursor is opaque (the last row's sort key, encoded) and can be longer than the 200
 * characters of `pageInput`; the service refuses anything it did not give, naming the cursor.
 */
const usagePageInput = {
  limit: pageInput.limit,
  cursor: z.string().min(1).optional().describe('The previous page’s nextCursor, for the page after it'),
};

const usageList = method({
  kind: 'query',
  summary:
    'GPU-seconds per tenant, pool and GPU model, per hour (the tenant’s own, and all tenants’ on pools it owns)',
  tenantScoped: true,
  input: z.object({ ...usageFilter, ...usagePageInput }).strict(),
  output: pageOf(usageRowSchema),
});

const usageExport = method({
  kind: 'query',
  summary: 'Usage windows as CSV or JSON lines, returned in the answer',
  access: { action: 'compute:usage:export' },
  tenantScoped: true,
  input: z
    .object({
      ...usageFilter,
      format: z
        .enum(['csv', 'jsonl'])
        .default('csv')
        .describe('The export format: csv or jsonl (one JSON row a line)'),
    })
    .strict(),
  output: z.object({
    format: z.enum(['csv', 'jsonl']),
    contentType: z.string(),
    rows: z.number().int(),
    content: z.string(),
    /** The billing meter the rows' gpuSeconds count in (USAGE_METERS). */
    meter: z.string(),
  }),
});

/** The `usage` group: each method's name, route (`/usage/…`) and default IAM action come from here. */
export const usageGroup = defineGroup(
  'usage',
  { module: 'fleet' },
  {
    list: usageList,
    export: usageExport,
  },
);
