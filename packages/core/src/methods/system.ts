/** The `system` group: what this deployment is, who is calling, and which routes it serves. */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';

const systemVersion = method({
  kind: 'query',
  summary: 'The product and version this deployment runs',
  access: { public: true },
  tenantScoped: false,
  input: z.object({}).strict(),
  output: z.object({ product: z.string(), version: z.string(), apiVersion: z.number().int() }),
});

const systemWhoami = method({
  kind: 'query',
  summary: 'The identity the credential authenticates as, and the tenant acting',
  access: { authenticated: true },
  tenantScoped: true,
  input: z
    .object({
      tenantId: z
        .string()
        .optional()
        .describe('The tenant acting, like acme; the credential’s own when omitted'),
    })
    .strict(),
  output: z.object({
    principalId: z.string(),
    principalKind: z.enum(['person', 'service-account', 'agent']),
    tenantId: z.string(),
    actingTenantId: z.string(),
    credentialKind: z.enum(['session', 'api-key', 'jwt']),
    mfa: z.boolean(),
    expiresAt: z.string().nullable(),
    displayName: z.string().optional(),
    email: z.string().optional(),
    platformOperator: z.boolean(),
  }),
});

const systemRoutes = method({
  kind: 'query',
  summary: 'The live route table: every method, whether it is public, and its IAM action',
  access: { authenticated: true },
  tenantScoped: false,
  input: z
    .object({
      group: z
        .string()
        .optional()
        .describe('Only the methods of this group, like pools or nodes; every method when omitted'),
    })
    .strict(),
  output: z.object({
    items: z.array(
      z.object({
        method: z.string(),
        path: z.string(),
        kind: z.enum(['query', 'mutation']),
        public: z.boolean(),
        action: z.string().nullable(),
        module: z.string(),
        summary: z.string(),
      }),
    ),
    nextCursor: z.null(),
  }),
});

/** The `system` group: each method's name, route (`/system/…`) and default IAM action come from here. */
export const systemGroup = defineGroup(
  'system',
  { module: 'core' },
  {
    version: systemVersion,
    whoami: systemWhoami,
    routes: systemRoutes,
  },
);
