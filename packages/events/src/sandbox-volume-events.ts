/**
 * The events of sandbox volumes, spread into the catalog (catalog.ts): a volume placed, ready,
 * grown, wiped or failed on its node.
 */
import { z } from 'zod';

const sandboxVolumeChange = z.object({
  state: z.string(),
  poolId: z.string(),
  nodeId: z.string().nullable(),
  sizeGiB: z.number().int(),
  version: z.number().int(),
  reason: z.string().optional(),
});

export const sandboxVolumeEventTypes = {
  'sandbox-volume.created': {
    subject: 'sandboxVolume' as const,
    data: sandboxVolumeChange,
    summary: 'A sandbox volume was placed on a node and is being made',
  },
  'sandbox-volume.ready': {
    subject: 'sandboxVolume' as const,
    data: sandboxVolumeChange,
    summary: 'A sandbox volume is ready to mount',
  },
  'sandbox-volume.resized': {
    subject: 'sandboxVolume' as const,
    data: sandboxVolumeChange,
    summary: 'A sandbox volume grew',
  },
  'sandbox-volume.deleted': {
    subject: 'sandboxVolume' as const,
    data: sandboxVolumeChange,
    summary: 'A sandbox volume was wiped and removed',
  },
  'sandbox-volume.failed': {
    subject: 'sandboxVolume' as const,
    data: sandboxVolumeChange,
    summary: 'A step on a sandbox volume’s node failed',
  },
} as const;
