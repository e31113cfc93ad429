/**
 * The events of signed bcd releases (docs/releases.md) and their rollouts (docs/rollouts.md), in
 * the catalog beside the rest. Releases and rollouts are the platform's: their events are written
 * in the root tenant.
 */
import { z } from 'zod';
import type { EventTypeSpec } from './subjects.js';

/** Which wave of which release an event of a rollout is about. */
const wave = z.object({ version: z.string(), wave: z.number().int() });

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
  'release.pins-rotated': {
    subject: 'release',
    data: z.object({
      epoch: z.number().int(),
      /** The new release key ids, and how many must sign a release. */
      pins: z.array(z.string()),
      threshold: z.number().int(),
      /** The keys of the epoch before whose signatures verified. */
      signers: z.array(z.string()),
    }),
    summary:
      'The release keys changed by a statement a threshold of the keys before signed; nodes follow it at their next welcome',
  },
  'release.artifact-stored': {
    subject: 'release',
    data: z.object({
      version: z.string(),
      platform: z.string(),
      size: z.number().int(),
      sha256: z.string(),
    }),
    summary:
      "A release's build for a platform is stored whole, with the size and SHA-256 its signed manifest names",
  },
  'rollout.created': {
    subject: 'rollout',
    data: z.object({
      version: z.string(),
      nodes: z.number().int(),
      waves: z.array(z.number().int()),
      failureBudget: z.number().int(),
      healthTimeoutSeconds: z.number().int(),
    }),
    summary: 'A rollout of a bcd release was created: its nodes and how many each wave updates',
  },
  'rollout.wave-started': {
    subject: 'rollout',
    data: wave.extend({ nodeIds: z.array(z.string()) }),
    summary: "A rollout's wave started: each of its nodes got an update workflow",
  },
  'rollout.wave-passed': {
    subject: 'rollout',
    data: wave.extend({ succeeded: z.number().int(), failed: z.number().int() }),
    summary: "A rollout's wave passed its gate: its failures are within the failure budget",
  },
  'rollout.node-succeeded': {
    subject: 'rollout',
    data: wave.extend({ nodeId: z.string(), workflowId: z.string().nullable() }),
    summary: 'A node of a rollout came back healthy with the new version',
  },
  'rollout.node-failed': {
    subject: 'rollout',
    data: wave.extend({ nodeId: z.string(), workflowId: z.string().nullable(), error: z.string() }),
    summary:
      'A node of a rollout did not come back healthy with the new version (it returns to the old one by itself)',
  },
  'rollout.paused': {
    subject: 'rollout',
    data: wave.extend({ reason: z.string(), by: z.enum(['gate', 'operator']) }),
    summary: 'A rollout paused: a wave failed its gate, or an operator paused it; no further wave starts',
  },
  'rollout.resumed': {
    subject: 'rollout',
    data: wave,
    summary: 'A paused rollout was resumed',
  },
  'rollout.aborted': {
    subject: 'rollout',
    data: wave.extend({
      skipped: z.number().int(),
      /** The nodes whose update was sent but not yet run: their workflow aborted, their command cancelled. */
      cancelled: z.array(z.string()),
    }),
    summary:
      'A rollout was aborted: the nodes not yet started never receive the release, and updates not yet run are cancelled',
  },
  'rollout.completed': {
    subject: 'rollout',
    data: z.object({ version: z.string(), succeeded: z.number().int(), failed: z.number().int() }),
    summary: 'Every wave of a rollout passed its gate',
  },
} as const satisfies Record<string, EventTypeSpec>;
