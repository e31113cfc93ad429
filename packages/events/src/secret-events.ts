/**
 * The events of write-only secrets (docs/secrets.md), spread into the catalog (catalog.ts): a
 * secret put (created, or a new version) and deleted. They name the secret and its version only;
 * no event ever carries a value.
 */
import { z } from 'zod';

const secretData = z.object({ name: z.string(), version: z.number().int() }).strict();

export const secretEventTypes = {
  'secret.put': {
    subject: 'secret' as const,
    data: secretData.extend({ created: z.boolean() }).strict(),
    summary: 'A secret was created, or given a new version (its value is never in an event)',
  },
  'secret.deleted': {
    subject: 'secret' as const,
    data: secretData,
    summary: 'A secret and its value were deleted',
  },
} as const;
