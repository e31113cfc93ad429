/**
 * The `delegations.*` methods of IAM's table (methods.ts spreads them in): an agent's delegation,
 * set by its person or a tenant administrator, never by an agent (areas/delegations.ts).
 */
import { z } from 'zod';
import { defineMethod, isId, TENANT_ID_PATTERN } from '@better-compute/core';

const tenantId = z.string().regex(TENANT_ID_PATTERN, 'must be a tenant id such as acme');
const isoTime = z.string();
const limit = z.number().int().min(1).max(500).default(50);
const cursor = z.string().min(1).max(200).optional();
const delegationId = z
  .string()
  .refine((value) => isId('delegation', value), { message: 'must be an id like dlg_01…' })
  .describe('The delegation, like dlg_01…');
const agentId = z
  .string()
  .refine((value) => isId('agent', value), { message: 'must be an agent id like agt_01…' })
  .describe('The agent, like agt_01…');
/** Action patterns, IAM's grammar without `@own`; checked further by the delegations area. */
export const confirmPatterns = z
  .array(z.string().min(1).max(200))
  .max(100)
  .describe('Action patterns whose calls wait for the person’s confirmation (default: DEFAULT_CONFIRM)');
export const spendLimitGpuHours = z
  .number()
  .min(0)
  .max(10_000_000)
  .nullable()
  .describe('GPU-hours one reservation may take without confirmation; null for no limit');
const delegation = z.object({
  id: z.string(),
  tenantId: z.string(),
  agentId: z.string(),
  personId: z.string(),
  confirm: z.array(z.string()),
  spendLimitGpuHours: z.number().nullable(),
  createdBy: z.string(),
  createdAt: isoTime,
  expiresAt: isoTime.nullable(),
  revokedAt: isoTime.nullable(),
  state: z.enum(['active', 'expired', 'revoked']),
});

export const delegationMethods = {
  'delegations.create': defineMethod({
    group: 'delegations',
    module: 'iam',
    name: 'create',
    kind: 'mutation',
    summary:
      'Set an agent’s delegation (which of its calls wait for your confirmation), replacing its active one; never by an agent',
    access: { action: 'iam:delegations:create' },
    tenantScoped: true,
    input: z
      .object({
        tenantId: tenantId.optional(),
        agentId,
        confirm: confirmPatterns.optional(),
        spendLimitGpuHours: spendLimitGpuHours.optional(),
        expiresAt: isoTime.optional().describe('When the delegation (and so the agent) stops working'),
      })
      .strict(),
    output: delegation,
  }),
  'delegations.list': defineMethod({
    group: 'delegations',
    module: 'iam',
    name: 'list',
    kind: 'query',
    summary: 'Delegations: your agents’ (an agent: its own), or the tenant’s with iam:delegations:list',
    access: { action: 'iam:delegations:list' },
    tenantScoped: true,
    input: z.object({ tenantId: tenantId.optional(), agentId: agentId.optional(), limit, cursor }).strict(),
    output: z.object({ items: z.array(delegation), nextCursor: z.string().nullable() }),
  }),
  'delegations.get': defineMethod({
    group: 'delegations',
    module: 'iam',
    name: 'get',
    kind: 'query',
    summary: 'One delegation',
    access: { action: 'iam:delegations:get' },
    tenantScoped: true,
    input: z.object({ tenantId: tenantId.optional(), delegationId: delegationId }).strict(),
    output: delegation,
  }),
  'delegations.revoke': defineMethod({
    group: 'delegations',
    module: 'iam',
    name: 'revoke',
    kind: 'mutation',
    summary:
      'Revoke a delegation: its agent stops authenticating, its streams and tunnels close, its confirmations end',
    access: { action: 'iam:delegations:revoke' },
    tenantScoped: true,
    input: z.object({ tenantId: tenantId.optional(), delegationId: delegationId }).strict(),
    output: delegation,
  }),
} as const;
