/** The `joinRequests` group: machines that asked to join with a join token, waiting for an operator. */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';
import { inventorySchema } from './inventory.js';
import { labels } from './sites.js';

const joinRequestSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  poolId: z.string(),
  joinTokenId: z.string(),
  hostname: z.string(),
  inventory: inventorySchema,
  labels: z.record(z.string(), z.string()),
  state: z.enum(['pending', 'approved', 'rejected']),
  nodeId: z.string().nullable(),
  reason: z.string().nullable(),
  createdAt: isoTime,
  decidedAt: isoTime.nullable(),
});

const joinRequestsList = method({
  kind: 'query',
  summary: 'List join requests',
  tenantScoped: true,
  input: z
    .object({
      tenantId,
      state: z
        .enum(['pending', 'approved', 'rejected'])
        .optional()
        .describe('Only join requests in this state; all when omitted'),
      poolId: idOf('pool').optional(),
      ...pageInputById('joinRequest'),
    })
    .strict(),
  output: pageOf(joinRequestSchema),
});

const joinRequestsApprove = method({
  kind: 'mutation',
  summary: 'Admit a machine: it becomes a node in the token’s pool',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-join-request', id: input.joinRequestId }),
  input: z.object({ tenantId, joinRequestId: idOf('joinRequest'), labels: labels.optional() }).strict(),
  output: joinRequestSchema,
});

const joinRequestsReject = method({
  kind: 'mutation',
  summary: 'Turn down a machine that asked to join',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-join-request', id: input.joinRequestId }),
  input: z
    .object({
      tenantId,
      joinRequestId: idOf('joinRequest'),
      reason: z
        .string()
        .max(500)
        .optional()
        .describe('Why it is rejected, kept on the request (up to 500 characters)'),
    })
    .strict(),
  output: joinRequestSchema,
});

/** The `joinRequests` group: each method's name, route (`/joinRequests/…`) and default IAM action come from here. */
export const joinRequestsGroup = defineGroup(
  'joinRequests',
  { module: 'fleet' },
  {
    list: joinRequestsList,
    approve: joinRequestsApprove,
    reject: joinRequestsReject,
  },
);
