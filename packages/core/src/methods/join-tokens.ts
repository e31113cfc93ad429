/**
 * The `joinTokens` group. A join token is `jtok_….SECRET`: shown once at create, stored as a SHA-256
 * hash. Ids never contain a `.`, so a pasted token is refused where an id is expected.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idempotencyKey, idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';

const joinTokenSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  poolId: z.string(),
  description: z.string(),
  usesAllowed: z.number().int(),
  usesLeft: z.number().int(),
  /** Nodes joining with a pre-approved token become nodes at once, without a join request to approve. */
  preApproved: z.boolean(),
  state: z.enum(['active', 'used', 'expired', 'revoked']),
  expiresAt: isoTime,
  revokedAt: isoTime.nullable(),
  createdAt: isoTime,
});

const joinTokensCreate = method({
  kind: 'mutation',
  summary: 'Mint a join token for a pool; the secret is in this answer (and its retries) only',
  tenantScoped: true,
  idempotent: true,
  // A retry with the same key gets the same token back; the kept answer holds it sealed.
  sealed: ['token'],
  input: z
    .object({
      tenantId,
      poolId: idOf('pool'),
      uses: z
        .number()
        .int()
        .min(1)
        .max(100_000)
        .default(1)
        .describe('How many machines may join with the token (1 to 100,000)'),
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
        .describe('Nodes joining with it become nodes at once, without a join request to approve'),
      description: z
        .string()
        .max(500)
        .optional()
        .describe('What the token is for, for people (up to 500 characters)'),
      idempotencyKey: idempotencyKey.optional(),
    })
    .strict(),
  output: z.object({ joinToken: joinTokenSchema, token: z.string() }),
});

const joinTokensList = method({
  kind: 'query',
  summary: 'List join tokens (never their secrets)',
  tenantScoped: true,
  input: z.object({ tenantId, poolId: idOf('pool').optional(), ...pageInputById('joinToken') }).strict(),
  output: pageOf(joinTokenSchema),
});

const joinTokensRevoke = method({
  kind: 'mutation',
  summary: 'Revoke a join token; the join requests made with it that wait are rejected',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-join-token', id: input.joinTokenId }),
  input: z.object({ tenantId, joinTokenId: idOf('joinToken') }).strict(),
  output: joinTokenSchema,
});

/** The `joinTokens` group: each method's name, route (`/joinTokens/…`) and default IAM action come from here. */
export const joinTokensGroup = defineGroup(
  'joinTokens',
  { module: 'fleet' },
  {
    create: joinTokensCreate,
    list: joinTokensList,
    revoke: joinTokensRevoke,
  },
);
