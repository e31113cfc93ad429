/**
 * The commands the control plane sends a node's runtime for VPS instances and sandboxes, and what the daemon
 * answers: one definition for the workflows that queue them and the daemon that runs them, so the
 * two sides can never disagree on a field. Every payload is checked with its schema on both sides.
 */
import { z } from 'zod';

const sha256 = z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 digest in lower-case hex');
const instanceId = z.string().regex(/^inst_[A-Za-z0-9]{1,64}$/);
const imageId = z.string().regex(/^img_[A-Za-z0-9]{1,64}$/);
const sandboxId = z.string().regex(/^sbx_[A-Za-z0-9]{1,64}$/);
const snapshotId = z.string().regex(/^snap_[A-Za-z0-9]{1,64}$/);
const volumeId = z.string().regex(/^vol_[A-Za-z0-9]{1,64}$/);
/** An OpenSSH public key or certificate line. */
const sshLine = z
  .string()
  .max(16_384)
  .regex(/^[a-z0-9@.-]+ [A-Za-z0-9+/]+={0,3}( [^\n\0]*)?$/);

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
  /**
   * A tenant's file: every address the download reaches, redirects included, must be on the
   * public internet (core's classifyHost), checked after resolution and connected to as checked.
   */
  publicOnly: z.boolean().optional(),
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

/** An environment variable's name, as a template names it. */
const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/);
/** The most bytes of environment values one sandbox.create carries (the session's frames are 1 MiB). */
export const MAX_SANDBOX_ENV_BYTES = 262_144;

/**
 * One environment variable of a sandbox, from a secret. As the command is stored and queued it
 * holds the reference only (`secretRef`); the gateway resolves it into `value` as it signs the
 * command for the node, so a value is in the signed message and nowhere in the database
 * (docs/secrets.md). The daemon runs only resolved entries.
 */
export const sandboxEnvEntry = z.union([
  z
    .object({
      name: envName,
      secretRef: z.string().regex(/^secret:\/\/[a-z0-9][a-z0-9-]{0,62}\/sec_[0-9a-z]{26}$/),
    })
    .strict(),
  z
    .object({
      name: envName,
      value: z
        .string()
        .max(32_768)
        .refine((v) => !v.includes('\0')),
    })
    .strict(),
]);
export type SandboxEnvEntry = z.infer<typeof sandboxEnvEntry>;

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
  /**
   * Boot the instance with this shape and wait until the guest answers. `egress`: whether the guest
   * may open connections beyond the node (NAT through the node's uplinks); it never reaches the
   * node's own addresses either way. Absent means on, as a control plane without the field meant.
   */
  'instance.start': z.object({
    instanceId,
    image: runtimeImageSchema,
    shape: machineShapeSchema,
    readyTimeoutMs: z.number().int().min(1000).max(3_600_000),
    egress: z.boolean().default(true),
  }),
  /** Ask the guest to power off (ACPI), then stop it by force after timeoutMs. */
  'instance.stop': z.object({ instanceId, timeoutMs: z.number().int().min(0).max(3_600_000) }),
  /** Grow a stopped instance's disk; vCPUs and memory take effect at its next start. */
  'instance.resize': z.object({ instanceId, diskGiB: z.number().int().min(1).max(65536) }),
  /** Stop the instance by force if it runs, and remove its disk and seed. */
  'instance.delete': z.object({ instanceId }),
} as const;

/**
 * The sandbox and volume kinds, with the same rules. Kept beside the instance kinds rather than
 * among them, so each runtime adds them when it runs sandboxes.
 */
export const sandboxCommandPayloads = {
  /**
   * Start a sandbox and wait until it is ready: on `bwrap`, an overlay root over the image's file
   * system in its own namespaces; on `qemu`, a guest. From a snapshot when `fromSnapshot` is set (on
   * this node). The node makes the sandbox's own SSH host key and answers its public half; user
   * certificates from `userCaPublicKey` naming the sandbox id open it as root.
   */
  'sandbox.create': z.object({
    sandboxId,
    runtime: z.enum(['bwrap', 'qemu']),
    image: runtimeImageSchema,
    shape: machineShapeSchema,
    network: z.enum(['egress', 'private', 'none']),
    volumes: z.array(z.object({ volumeId, path: z.string().max(1024), readOnly: z.boolean() })).max(16),
    userData: z.string().max(65536).nullable(),
    userCaPublicKey: sshLine,
    fromSnapshot: z.object({ snapshotId, memory: z.boolean() }).nullable(),
    readyTimeoutMs: z.number().int().min(100).max(3_600_000),
    /** Environment variables from secrets, set for the sandbox's processes and every session in it. */
    env: z.array(sandboxEnvEntry).max(64).default([]),
  }),
  /** Install the host certificate the sandbox SSH CA signed for the sandbox's host key. */
  'sandbox.certify': z.object({ sandboxId, hostCertificate: sshLine }),
  /** Stop the sandbox and remove its root, its keys and its namespaces (volumes stay). */
  'sandbox.delete': z.object({ sandboxId }),
  /** Copy the sandbox's disk (and on qemu its memory) into the node's snapshot store. */
  'sandbox.snapshot': z.object({ sandboxId, snapshotId, memory: z.boolean() }),
  'sandbox.snapshot-delete': z.object({ snapshotId }),
  /** A persistent volume of sizeGiB on this node (an ext4 file system, sparse until written). */
  'volume.create': z.object({ volumeId, sizeGiB: z.number().int().min(1).max(16_384) }),
  /** Grow a volume; it never shrinks. */
  'volume.resize': z.object({ volumeId, sizeGiB: z.number().int().min(1).max(16_384) }),
  /** Remove a volume and its data. */
  'volume.delete': z.object({ volumeId }),
} as const;

export type SandboxCommandKind = keyof typeof sandboxCommandPayloads;
export type SandboxCommandPayload<K extends SandboxCommandKind> = z.infer<(typeof sandboxCommandPayloads)[K]>;
export const SANDBOX_COMMAND_KINDS = Object.keys(sandboxCommandPayloads) as SandboxCommandKind[];

export function isSandboxCommandKind(kind: string): kind is SandboxCommandKind {
  return Object.hasOwn(sandboxCommandPayloads, kind);
}

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
    /**
     * A loopback port on the node forwarded to the guest's SSH; null on the qemu runtime, where
     * the node reaches the guest at its private address.
     */
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

/** What the daemon reports as a sandbox or volume command's result, per kind. */
export interface SandboxCommandResults {
  'sandbox.create': {
    sandboxId: string;
    /** The sandbox's SSH host public key (`ssh-ed25519 AAAA…`), for the control plane to certify. */
    hostPublicKey: string;
    /** From the command's start until the sandbox's SSH server could answer. */
    readyMs: number;
    /** False for a memory restore that still holds its source's identity. */
    identityRebound: boolean;
  };
  'sandbox.certify': { sandboxId: string; expiresAt: string };
  'sandbox.delete': { sandboxId: string; removed: boolean };
  'sandbox.snapshot': { sandboxId: string; snapshotId: string; sizeBytes: number; memory: boolean };
  'sandbox.snapshot-delete': { snapshotId: string; removed: boolean };
  'volume.create': { volumeId: string; sizeBytes: number };
  'volume.resize': { volumeId: string; sizeBytes: number };
  'volume.delete': { volumeId: string; removed: boolean };
}
