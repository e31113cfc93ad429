/**
 * The events of provision profiles (docs/profiles.md), spread into the catalog (catalog.ts): a
 * profile created, given a new version, and deleted. They name the profile and its version only;
 * the document (its user data, its join token reference) is read with profiles.get.
 */
import { z } from 'zod';

const profileData = z
  .object({ name: z.string(), version: z.number().int(), documentSha256: z.string() })
  .strict();

export const profileEventTypes = {
  'profile.created': {
    subject: 'profile' as const,
    data: profileData,
    summary: 'A provision profile was created',
  },
  'profile.updated': {
    subject: 'profile' as const,
    data: profileData,
    summary: 'A provision profile’s document was replaced (a new version)',
  },
  'profile.deleted': {
    subject: 'profile' as const,
    data: profileData,
    summary: 'A provision profile was deleted',
  },
} as const;
