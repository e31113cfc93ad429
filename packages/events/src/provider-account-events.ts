/**
 * The events of provider accounts (docs/provider-accounts.md), spread into the catalog (catalog.ts):
 * an account created, given a new version, deleted, and each bootstrap's start, hosts and end. They
 * name the account, its version and hosts only; credentials are references and appear in none.
 */
import { z } from 'zod';

const accountData = z
  .object({ name: z.string(), driver: z.string(), version: z.number().int(), hosts: z.number().int() })
  .strict();

export const providerAccountEventTypes = {
  'providerAccount.created': {
    subject: 'providerAccount' as const,
    data: accountData,
    summary: 'A provider account was created',
  },
  'providerAccount.updated': {
    subject: 'providerAccount' as const,
    data: accountData,
    summary: 'A provider account’s document was replaced (a new version)',
  },
  'providerAccount.deleted': {
    subject: 'providerAccount' as const,
    data: accountData,
    summary: 'A provider account was deleted',
  },
  'providerAccount.bootstrap-started': {
    subject: 'providerAccount' as const,
    data: z.object({ bootstrapId: z.string(), poolId: z.string(), hosts: z.array(z.string()) }).strict(),
    summary: 'A bootstrap of the account’s hosts into a pool started',
  },
  'providerAccount.host-joined': {
    subject: 'providerAccount' as const,
    data: z
      .object({
        bootstrapId: z.string(),
        poolId: z.string(),
        host: z.string(),
        nodeId: z.string(),
        alreadyNode: z.boolean(),
      })
      .strict(),
    summary: 'A host of a bootstrap is a node of its pool (joined now, or already one)',
  },
  'providerAccount.host-failed': {
    subject: 'providerAccount' as const,
    data: z
      .object({ bootstrapId: z.string(), poolId: z.string(), host: z.string(), error: z.string() })
      .strict(),
    summary: 'A host of a bootstrap could not be made a node',
  },
  'providerAccount.bootstrap-finished': {
    subject: 'providerAccount' as const,
    data: z
      .object({
        bootstrapId: z.string(),
        poolId: z.string(),
        state: z.enum(['succeeded', 'failed']),
        joined: z.number().int(),
        failed: z.number().int(),
      })
      .strict(),
    summary: 'A bootstrap ended: succeeded when every host is a node of the pool',
  },
} as const;
