/**
 * The events of fleet configuration (docs/fleet.md), spread into the catalog (catalog.ts): a plan
 * applied, and the fleet.drift job's verdicts when the live fleet moves away from the last apply
 * and when it is back. Their subject is the apply (`fapl_…`) the fleet is compared with.
 */
import { z } from 'zod';

const count = z.number().int();
const counts = z.object({ create: count, update: count, delete: count });

export const fleetEventTypes = {
  'fleet.applied': {
    subject: 'fleet' as const,
    data: z.object({ planHash: z.string(), calls: count, changes: counts, prune: z.boolean() }),
    summary: 'A reviewed fleet plan was applied, every call in one transaction',
  },
  'fleet.drifted': {
    subject: 'fleet' as const,
    data: z.object({ changes: count }),
    summary: 'The fleet.drift job found the live fleet differing from the last apply',
  },
  'fleet.converged': {
    subject: 'fleet' as const,
    data: z.object({}).strict(),
    summary: 'The live fleet is what the last apply made it again',
  },
} as const;
