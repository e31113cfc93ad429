/**
 * The events of signed bcd releases (docs/releases.md), in the catalog beside the rest. A release
 * is the platform's: its events are written in the root tenant.
 */
import { z } from 'zod';
import type { EventTypeSpec } from './subjects.js';

export const releaseEvents = {
  'release.registered': {
    subject: 'release',
    data: z.object({
      version: z.string(),
      minimumVersion: z.string(),
      /** SHA-256 of the manifest's canonical JSON. */
      digest: z.string(),
      platforms: z.array(z.string()),
      /** The pinned keys whose signatures verified. */
      signers: z.array(z.string()),
    }),
    summary:
      'A signed bcd release was registered: a threshold of the pinned release keys signed its manifest',
  },
} as const satisfies Record<string, EventTypeSpec>;
