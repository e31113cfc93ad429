/**
 * The sandboxes' shapes: runtimes, limits, the template, sandbox, snapshot, volume, quota and exec
 * grant records, and the template's writable fields, shared by the groups in sandboxes.ts.
 */
import { z } from 'zod';
import { idOf, isoTime } from './common.js';
import { resourceName } from './sites.js';

/** What runs a sandbox: bubblewrap on the node (disk snapshots only) or a QEMU guest (memory too). */
export const sandboxRuntime = z.enum(['bwrap', 'qemu']);
/** egress: its own network namespace with outbound NAT; private: loopback and the node only; none: loopback only. */
const sandboxNetwork = z.enum(['egress', 'private', 'none']);
export const sandboxState = z.enum(['starting', 'warm', 'running', 'deleting', 'deleted', 'failed']);

/** The most sandboxes a template keeps warm. */
const MAX_WARM = 64;
/** How long `sandboxes.create` may wait for a cold sandbox to be ready, in seconds. */
export const MAX_CREATE_WAIT_SECONDS = 30;
/** The longest lifetime a template may allow: seven days. */
export const MAX_SANDBOX_TTL_SECONDS = 7 * 24 * 3600;
/** The most user data a template takes, in characters. */
const MAX_SANDBOX_USER_DATA = 32_768;
export const MIN_VOLUME_GIB = 1;
export const MAX_VOLUME_GIB = 16_384;
/** The OpenSSH certificate `sandboxes.exec` grants lives `minutes`, 1 to 15, 10 unless asked. */
export const SANDBOX_EXEC_MIN_MINUTES = 1;
export const SANDBOX_EXEC_MAX_MINUTES = 15;
export const SANDBOX_EXEC_DEFAULT_MINUTES = 10;

export const SANDBOX_MANAGE_ACTION = 'compute:sandboxes:manage';
export const SANDBOX_EXEC_ACTION = 'compute:sandboxes:exec';
/** Naming a volume in a template is decided on the volume. */
export const SANDBOX_ATTACH_ACTION = 'compute:sandboxes:attach';

/** A secret reference, never a value: `secret://<tenant>/<sec_…>`. */
const secretReference = z
  .string()
  .max(200)
  .regex(
    /^secret:\/\/[a-z0-9][a-z0-9-]{0,62}\/sec_[0-9a-z]{26}$/,
    'must be a secret reference secret://TENANT/sec_…',
  );
const envName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'must be an environment variable name (letters, digits, _)');
export const ttlSeconds = z.number().int().min(60).max(MAX_SANDBOX_TTL_SECONDS);
const mountPath = z
  .string()
  .max(1024)
  .regex(/^\/[^\0]*$/, 'must be an absolute path')
  .refine((path) => !path.split('/').includes('..'), 'must not contain ..');

/** A volume a template mounts: named by id or by name (resolved to its id when stored). */
const templateVolumeInput = z
  .object({
    volumeId: idOf('volume').optional(),
    name: resourceName.optional(),
    path: mountPath,
    readOnly: z.boolean().default(false),
  })
  .strict()
  .refine(
    (v) => (v.volumeId === undefined) !== (v.name === undefined),
    'name exactly one of volumeId and name',
  );

export const sandboxTemplateSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  name: z.string(),
  poolId: z.string(),
  flavorId: z.string(),
  imageId: z.string(),
  runtime: sandboxRuntime,
  userData: z.string().nullable(),
  defaultTtlSeconds: z.number().int(),
  maxTtlSeconds: z.number().int(),
  warm: z.object({
    min: z.number().int(),
    max: z.number().int(),
    /** Booted and waiting to be claimed. */
    ready: z.number().int(),
    /** Being started for the pool. */
    starting: z.number().int(),
  }),
  env: z.array(z.object({ name: z.string(), secretRef: z.string() })),
  network: sandboxNetwork,
  volumes: z.array(
    z.object({ volumeId: z.string(), name: z.string(), path: z.string(), readOnly: z.boolean() }),
  ),
  version: z.number().int(),
  createdAt: isoTime,
  updatedAt: isoTime,
});

export const sandboxSnapshotSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  sandboxId: z.string(),
  templateId: z.string(),
  nodeId: z.string(),
  state: z.enum(['creating', 'ready', 'deleting', 'deleted', 'failed']),
  /** Whether it holds the sandbox's memory (qemu only) as well as its disk. */
  memory: z.boolean(),
  /** Kept snapshots outlive their sandbox; others are deleted with it. */
  keep: z.boolean(),
  sizeBytes: z.number().int().nullable(),
  reason: z.string().nullable(),
  ownerId: z.string().nullable(),
  createdAt: isoTime,
  deletedAt: isoTime.nullable(),
});

export const sandboxSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  templateId: z.string(),
  poolId: z.string(),
  nodeId: z.string().nullable(),
  runtime: sandboxRuntime,
  state: sandboxState,
  reason: z.string().nullable(),
  /** Whether this create claimed a sandbox from the template's warm pool. */
  warm: z.boolean(),
  /** The snapshot it was restored from. */
  fromSnapshotId: z.string().nullable(),
  /**
   * False only for a memory restore that still shares its source's SSH identity; exec refuses
   * until the node gave it its own host key (`restore-shares-identity`).
   */
  identityRebound: z.boolean(),
  /** Whether the node holds a host certificate for it from the sandbox SSH CA, and until when. */
  hostCertified: z.boolean(),
  hostCertificateExpiresAt: isoTime.nullable(),
  expiresAt: isoTime.nullable(),
  ownerId: z.string().nullable(),
  agentId: z.string().nullable(),
  version: z.number().int(),
  createdAt: isoTime,
  /** When it was ready (booted, its SSH server answering). */
  readyAt: isoTime.nullable(),
  updatedAt: isoTime,
  deletedAt: isoTime.nullable(),
});

export const sandboxVolumeSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  poolId: z.string(),
  /** The node it lives on, once placed. */
  nodeId: z.string().nullable(),
  name: z.string(),
  sizeGiB: z.number().int(),
  state: z.enum(['creating', 'ready', 'resizing', 'deleting', 'deleted', 'failed']),
  reason: z.string().nullable(),
  /** Templates that mount it. */
  templateIds: z.array(z.string()),
  ownerId: z.string().nullable(),
  version: z.number().int(),
  createdAt: isoTime,
  updatedAt: isoTime,
  deletedAt: isoTime.nullable(),
});

export const sandboxQuotaResource = z.enum(['sandboxes', 'vcpus', 'memoryMiB']);

/** A tenant's sandbox quota on a pool and what it holds (every sandbox not deleted, warm ones too). */
export const sandboxQuotaSchema = z.object({
  tenantId: z.string(),
  poolId: z.string(),
  resource: sandboxQuotaResource,
  limit: z.number().int().nullable(),
  used: z.number().int(),
});

/** What `sandboxes.exec` grants: everything the CLI needs to run ssh through one tunnel. */
export const sandboxExecGrantSchema = z.object({
  sandboxId: z.string(),
  /** Single use: the path segment of `{base}/tunnels/{ticket}`, a byte stream to the sandbox's SSH server. */
  ticket: z.string(),
  ticketExpiresAt: isoTime,
  /** The OpenSSH user certificate for the caller's key (`ssh-ed25519-cert-v01@openssh.com AAAA…`). */
  certificate: z.string(),
  certificateExpiresAt: isoTime,
  /** The account to log in as. */
  account: z.string(),
  /** The principal the guest's host certificate names (the sandbox id). */
  hostPrincipal: z.string(),
  /** Whether the guest holds a still-valid host certificate from the sandbox SSH CA. */
  hostCertified: z.boolean(),
  /** The sandbox SSH CA's public key, for `@cert-authority` pinning. */
  hostCaPublicKey: z.string(),
});

export const templateFields = {
  flavorId: idOf('flavor'),
  imageId: idOf('image'),
  userData: z
    .string()
    .max(MAX_SANDBOX_USER_DATA)
    .nullable()
    .describe(
      'A file run at a sandbox’s first start (on bwrap a #! script), up to 32,768 characters; null for none',
    ),
  defaultTtlSeconds: ttlSeconds.describe(
    'The lifetime of a sandbox that asks none, in seconds (60 to 604,800)',
  ),
  maxTtlSeconds: ttlSeconds.describe(
    'The longest a sandbox may live, extended or not, in seconds (60 to 604,800)',
  ),
  warmMin: z
    .number()
    .int()
    .min(0)
    .max(MAX_WARM)
    .describe('How many sandboxes to keep booted and waiting (0 to 64)'),
  warmMax: z
    .number()
    .int()
    .min(0)
    .max(MAX_WARM)
    .describe('The most sandboxes kept warm (0 to 64, at least warmMin)'),
  env: z
    .array(z.object({ name: envName, secretRef: secretReference }).strict())
    .max(64)
    .describe('Environment variables from secrets: { name, secretRef: secret://TENANT/sec_… } (at most 64)'),
  network: sandboxNetwork.describe(
    'egress (outbound NAT), private (loopback and the node only) or none (loopback only)',
  ),
  volumes: z
    .array(templateVolumeInput)
    .max(16)
    .describe(
      'Volumes its sandboxes mount, each by volumeId or name, with its path and readOnly (at most 16)',
    ),
};
