/**
 * The `siteTokens` group. A site token is `stok_….SECRET`: a join token whose machine joins as the
 * site agent of its pool's site (the `bcd` that reaches the site's BMCs and runs its provisioning
 * network) rather than as a worker. It is kept with the join tokens and used through the same
 * public `nodes.join`; only the role of the node it makes differs. Shown once at create, stored
 * as a SHA-256 hash; ids never contain a `.`, so a pasted token is refused where an id is expected.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idempotencyKey, idOf, isoTime, tenantId } from './common.js';

const siteTokenSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  /** The site the agent serves: its pool's site. */
  siteId: z.string(),
  /** The pool the agent's node is recorded in (it never takes reservations there). */
  poolId: z.string(),
  description: z.string(),
  usesAllowed: z.number().int(),
  usesLeft: z.number().int(),
  preApproved: z.boolean(),
  state: z.enum(['active', 'used', 'expired', 'revoked']),
  expiresAt: isoTime,
  revokedAt: isoTime.nullable(),
  createdAt: isoTime,
});

const siteTokensCreate = method({
  kind: 'mutation',
  summary:
    'Mint a site token: the machine joining with it becomes its site’s agent; the secret is in this answer only',
  tenantScoped: true,
  idempotent: true,
  // A retry with the same key gets the same token back; the kept answer holds it sealed.
  sealed: ['token'],
  input: z
    .object({
      tenantId,
      poolId: idOf('pool').describe('A pool of the site; the agent is recorded there and never takes work'),
      uses: z
        .number()
        .int()
        .min(1)
        .max(100)
        .default(1)
        .describe('How many agents may join with the token (1 to 100)'),
      lifetimeSeconds: z
        .number()
        .int()
        .min(60)
        .max(30 * 86_400)
        .default(86_400)
        .describe('How long the token is valid, in seconds (60 to 2,592,000, 30 days)'),
      preApproved: z
        .boolean()
        .default(false)
        .describe('Agents joining with it become nodes at once, without a join request to approve'),
      description: z
        .string()
        .max(500)
        .optional()
        .describe('What the token is for, for people (up to 500 characters)'),
      idempotencyKey: idempotencyKey.optional(),
    })
    .strict(),
  output: z.object({ siteToken: siteTokenSchema, token: z.string() }),
});

const siteTokensRevoke = method({
  kind: 'mutation',
  summary: 'Revoke a site token; the join requests made with it that wait are rejected',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-site-token', id: input.siteTokenId }),
  input: z.object({ tenantId, siteTokenId: idOf('siteToken') }).strict(),
  output: siteTokenSchema,
});

/** The `siteTokens` group: each method's name, route (`/siteTokens/…`) and default IAM action come from here. */
export const siteTokensGroup = defineGroup(
  'siteTokens',
  { module: 'fleet' },
  {
    create: siteTokensCreate,
    revoke: siteTokensRevoke,
  },
);
