/**
 * The commands the control plane sends a node's runtime for VPS instances, and what the daemon
 * answers: one definition for the workflows that queue them and the daemon that runs them, so the
 * two sides can never disagree on a field. Every payload is checked with its schema on both sides.
 */
import { z } from 'zod';

const sha256 = z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 digest in lower-case hex');
const instanceId = z.string().regex(/^inst_[A-Za-z0-9]{1,64}$/);
const imageId = z.string().regex(/^img_[A-Za-z0-9]{1,64}$/);

/**
 * One file of an image: where the node fetches it (an absolute path on the node, or an `https://`
 * URL), its SHA-256 and size. The daemon caches it by digest and refuses a file whose digest differs.
 */
export const imageFileSchema = z.object({
  source: z
    .string()
    .max(2048)
    .refine((s) => s.startsWith('/') || s.startsWith('https://'), 'an absolute path or an https:// URL'),
  sha256,
  sizeBytes: z.number().int().positive(),
});
export type ImageFile = z.infer<typeof imageFileSchema>;

/**
 * An image as a node needs it: the disk, and for images that boot their kernel directly (the
 * project's guest image does) the kernel, the initramfs and the kernel command line.
 */
export const runtimeImageSchema = z.object({
  imageId,
  diskFormat: z.enum(['qcow2', 'raw']),
  disk: imageFileSchema,
  boot: z
    .object({
      kernel: imageFileSchema,
      initrd: imageFileSchema.nullable(),
      cmdline: z.string().max(1024),
    })
    .nullable(),
});
export type RuntimeImage = z.infer<typeof runtimeImageSchema>;

/** The shape of a machine: what a flavor gives an instance. */
export const machineShapeSchema = z.object({
  vcpus: z.number().int().min(1).max(256),
  memoryMiB: z
    .number()
    .int()
    .min(128)
    .max(4 * 1024 * 1024),
  diskGiB: z.number().int().min(1).max(65536),
  /** Device ids of the GPUs the instance's reservation bound on this node (passed through where the node can). */
  gpus: z.array(z.string().max(128)).max(16),
});
export type MachineShape = z.infer<typeof machineShapeSchema>;

/** Each kind's payload. */
export const runtimeCommandPayloads = {
  /** Fetch an image's files into the node's cache and verify their digests. */
  'image.fetch': z.object({ image: runtimeImageSchema }),
  /** Make the instance's disk (a qcow2 overlay on the cached image, grown to diskGiB) and its NoCloud seed. */
  'instance.create': z.object({
    instanceId,
    hostname: z.string().regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/),
    image: runtimeImageSchema,
    shape: machineShapeSchema,
    sshKeys: z.array(z.string().max(8192)).max(32),
    userData: z.string().max(65536).nullable(),
  }),
  /** Boot the instance with this shape and wait until the guest answers. */
  'instance.start': z.object({
    instanceId,
    image: runtimeImageSchema,
    shape: machineShapeSchema,
    readyTimeoutMs: z.number().int().min(1000).max(3_600_000),
  }),
  /** Ask the guest to power off (ACPI), then stop it by force after timeoutMs. */
  'instance.stop': z.object({ instanceId, timeoutMs: z.number().int().min(0).max(3_600_000) }),
  /** Grow a stopped instance's disk; vCPUs and memory take effect at its next start. */
  'instance.resize': z.object({ instanceId, diskGiB: z.number().int().min(1).max(65536) }),
  /** Stop the instance by force if it runs, and remove its disk and seed. */
  'instance.delete': z.object({ instanceId }),
} as const;

export type RuntimeCommandKind = keyof typeof runtimeCommandPayloads;
export type RuntimeCommandPayload<K extends RuntimeCommandKind> = z.infer<(typeof runtimeCommandPayloads)[K]>;

export const RUNTIME_COMMAND_KINDS = Object.keys(runtimeCommandPayloads) as RuntimeCommandKind[];

/** What the daemon reports as a command's result, per kind. */
export interface RuntimeCommandResults {
  'image.fetch': { imageId: string; cached: boolean; bytes: number; cacheBytes: number };
  'instance.create': { instanceId: string; diskBytes: number };
  'instance.start': {
    instanceId: string;
    /** The guest's address as it reported it, when it did. */
    address: string | null;
    /** A loopback port on the node forwarded to the guest's SSH, for tunnels and tests. */
    sshPort: number | null;
    bootMs: number;
  };
  'instance.stop': { instanceId: string; forced: boolean };
  'instance.resize': { instanceId: string; diskGiB: number };
  'instance.delete': { instanceId: string; removed: boolean };
}

export function isRuntimeCommandKind(kind: string): kind is RuntimeCommandKind {
  return Object.hasOwn(runtimeCommandPayloads, kind);
}
