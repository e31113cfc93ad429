/**
 * Agent sandboxes: the `sandboxes`, `sandboxTemplates`, `sandboxSnapshots` and `sandboxVolumes`
 * groups. A template (`sbxt_…`) says what a sandbox is (pool, flavor, image, runtime, lifetimes,
 * network, volumes) and how many to keep booted and waiting (its warm pool). A sandbox (`sbx_…`)
 * is a personal resource of whoever created it, with a lifetime it can extend up to the template's
 * maximum. Snapshots (`snap_…`) keep a sandbox's disk, and on the qemu runtime its memory; volumes
 * (`vol_…`) are persistent disks on one node that a template's sandboxes mount. `sandboxes.exec`
 * is the way in: an OpenSSH certificate for the caller's key and a single-use tunnel to the
 * sandbox's SSH server.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idempotencyKey, idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';
import { ifVersion, resourceName } from './sites.js';
import { unixAccount } from './ssh-certs.js';

/** What runs a sandbox: bubblewrap on the node (disk snapshots only) or a QEMU guest (memory too). */
export const sandboxRuntime = z.enum(['bwrap', 'qemu']);
/** egress: its own network namespace with outbound NAT; private: loopback and the node only; none: loopback only. */
export const sandboxNetwork = z.enum(['egress', 'private', 'none']);
export const sandboxState = z.enum(['starting', 'warm', 'running', 'deleting', 'deleted', 'failed']);

/** The most sandboxes a template keeps warm. */
export const MAX_WARM = 64;
/** How long `sandboxes.create` may wait for a cold sandbox to be ready, in seconds. */
export const MAX_CREATE_WAIT_SECONDS = 30;
/** The longest lifetime a template may allow: seven days. */
export const MAX_SANDBOX_TTL_SECONDS = 7 * 24 * 3600;
/** The most user data a template takes, in characters. */
export const MAX_SANDBOX_USER_DATA = 32_768;
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
export const secretReference = z
  .string()
  .max(200)
  .regex(
    /^secret:\/\/[a-z0-9][a-z0-9-]{0,62}\/sec_[0-9a-z]{26}$/,
    'must be a secret reference secret://TENANT/sec_…',
  );
export const envName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'must be an environment variable name (letters, digits, _)');
const ttlSeconds = z.number().int().min(60).max(MAX_SANDBOX_TTL_SECONDS);
const mountPath = z
  .string()
  .max(1024)
  .regex(/^\/[^\0]*$/, 'must be an absolute path')
  .refine((path) => !path.split('/').includes('..'), 'must not contain ..');

/** A volume a template mounts: named by id or by name (resolved to its id when stored). */
export const templateVolumeInput = z
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

const sandboxResource = (input: { sandboxId: string }) => ({ type: 'compute-sandbox', id: input.sandboxId });
const templateResource = (input: { templateId: string }) => ({
  type: 'compute-sandbox-template',
  id: input.templateId,
});
const volumeResource = (input: { volumeId: string }) => ({
  type: 'compute-sandbox-volume',
  id: input.volumeId,
});
const snapshotResource = (input: { snapshotId: string }) => ({
  type: 'compute-sandbox-snapshot',
  id: input.snapshotId,
});

const templateFields = {
  flavorId: idOf('flavor'),
  imageId: idOf('image'),
  userData: z.string().max(MAX_SANDBOX_USER_DATA).nullable(),
  defaultTtlSeconds: ttlSeconds,
  maxTtlSeconds: ttlSeconds,
  warmMin: z.number().int().min(0).max(MAX_WARM),
  warmMax: z.number().int().min(0).max(MAX_WARM),
  env: z.array(z.object({ name: envName, secretRef: secretReference }).strict()).max(64),
  network: sandboxNetwork,
  volumes: z.array(templateVolumeInput).max(16),
};

export const sandboxTemplatesGroup = defineGroup(
  'sandboxTemplates',
  { module: 'sandboxes' },
  {
    list: method({
      kind: 'query',
      summary: 'List the tenant’s sandbox templates with their warm pools',
      access: { action: 'compute:sandboxes:read' },
      tenantScoped: true,
      input: z
        .object({
          tenantId,
          poolId: idOf('pool').optional(),
          name: resourceName.optional(),
          ...pageInputById('sandboxTemplate'),
        })
        .strict(),
      output: pageOf(sandboxTemplateSchema),
    }),
    get: method({
      kind: 'query',
      summary: 'Show a sandbox template and its warm pool',
      access: { action: 'compute:sandboxes:read' },
      tenantScoped: true,
      resource: templateResource,
      input: z.object({ tenantId, templateId: idOf('sandboxTemplate') }).strict(),
      output: sandboxTemplateSchema,
    }),
    create: method({
      kind: 'mutation',
      summary:
        'Define a sandbox template on a pool: flavor, image, runtime, lifetimes, warm pool, network, volumes',
      access: { action: SANDBOX_MANAGE_ACTION },
      alsoActions: [SANDBOX_ATTACH_ACTION],
      tenantScoped: true,
      idempotent: true,
      input: z
        .object({
          tenantId,
          name: resourceName,
          poolId: idOf('pool'),
          runtime: sandboxRuntime.default('bwrap'),
          ...templateFields,
          userData: templateFields.userData.default(null),
          defaultTtlSeconds: ttlSeconds.default(3600),
          maxTtlSeconds: ttlSeconds.default(4 * 3600),
          warmMin: templateFields.warmMin.default(0),
          warmMax: templateFields.warmMax.optional(),
          env: templateFields.env.default([]),
          network: sandboxNetwork.default('egress'),
          volumes: templateFields.volumes.default([]),
          idempotencyKey: idempotencyKey.optional(),
        })
        .strict(),
      output: sandboxTemplateSchema,
    }),
    update: method({
      kind: 'mutation',
      summary: 'Change a sandbox template; its warm sandboxes of the old image or settings are retired',
      access: { action: SANDBOX_MANAGE_ACTION },
      alsoActions: [SANDBOX_ATTACH_ACTION],
      tenantScoped: true,
      resource: templateResource,
      input: z
        .object({
          tenantId,
          templateId: idOf('sandboxTemplate'),
          ifVersion,
          flavorId: templateFields.flavorId.optional(),
          imageId: templateFields.imageId.optional(),
          userData: templateFields.userData.optional(),
          defaultTtlSeconds: templateFields.defaultTtlSeconds.optional(),
          maxTtlSeconds: templateFields.maxTtlSeconds.optional(),
          warmMin: templateFields.warmMin.optional(),
          warmMax: templateFields.warmMax.optional(),
          env: templateFields.env.optional(),
          network: templateFields.network.optional(),
          volumes: templateFields.volumes.optional(),
        })
        .strict(),
      output: sandboxTemplateSchema,
    }),
    delete: method({
      kind: 'mutation',
      summary: 'Delete a sandbox template with no live sandboxes; its warm pool is retired',
      access: { action: SANDBOX_MANAGE_ACTION },
      tenantScoped: true,
      resource: templateResource,
      input: z.object({ tenantId, templateId: idOf('sandboxTemplate'), ifVersion }).strict(),
      output: sandboxTemplateSchema,
    }),
  },
);

export const sandboxesGroup = defineGroup(
  'sandboxes',
  { module: 'sandboxes' },
  {
    list: method({
      kind: 'query',
      summary: 'List your sandboxes (the tenant’s with all), newest first',
      tenantScoped: true,
      input: z
        .object({
          tenantId,
          all: z.boolean().default(false),
          deleted: z.boolean().default(false),
          templateId: idOf('sandboxTemplate').optional(),
          ...pageInputById('sandbox'),
        })
        .strict(),
      output: pageOf(sandboxSchema),
    }),
    get: method({
      kind: 'query',
      summary: 'Show a sandbox with its snapshots',
      tenantScoped: true,
      resource: sandboxResource,
      input: z.object({ tenantId, sandboxId: idOf('sandbox') }).strict(),
      output: sandboxSchema.extend({ snapshots: z.array(sandboxSnapshotSchema) }),
    }),
    create: method({
      kind: 'mutation',
      summary: 'Start a sandbox from a template (a warm one when there is one) or from a snapshot',
      tenantScoped: true,
      idempotent: true,
      resource: (input) => ({ type: 'compute-sandbox-template', id: input.templateId }),
      input: z
        .object({
          tenantId,
          templateId: idOf('sandboxTemplate'),
          ttlSeconds: ttlSeconds.optional(),
          fromSnapshotId: idOf('snapshot').optional(),
          /** Seconds to wait for a cold sandbox to be ready; 0 answers at once, while it starts. */
          waitSeconds: z.number().int().min(0).max(MAX_CREATE_WAIT_SECONDS).default(10),
          idempotencyKey: idempotencyKey.optional(),
        })
        .strict(),
      output: sandboxSchema,
    }),
    extend: method({
      kind: 'mutation',
      summary: 'Lengthen a sandbox’s lifetime, never past its template’s maximum',
      tenantScoped: true,
      resource: sandboxResource,
      input: z
        .object({
          tenantId,
          sandboxId: idOf('sandbox'),
          bySeconds: z.number().int().min(1).max(MAX_SANDBOX_TTL_SECONDS).optional(),
          until: isoTime.optional(),
        })
        .strict()
        .refine((input) => (input.bySeconds === undefined) !== (input.until === undefined), {
          message: 'give exactly one of bySeconds and until',
          path: ['bySeconds'],
        }),
      output: sandboxSchema,
    }),
    delete: method({
      kind: 'mutation',
      summary: 'Delete a sandbox; its snapshots go with it unless kept',
      tenantScoped: true,
      resource: sandboxResource,
      input: z.object({ tenantId, sandboxId: idOf('sandbox') }).strict(),
      output: sandboxSchema,
    }),
    snapshot: method({
      kind: 'mutation',
      summary: 'Snapshot a sandbox’s disk, and its memory on the qemu runtime',
      tenantScoped: true,
      idempotent: true,
      resource: sandboxResource,
      input: z
        .object({
          tenantId,
          sandboxId: idOf('sandbox'),
          /** Default: what the runtime can (qemu: memory too; bwrap: disk only). */
          memory: z.boolean().optional(),
          keep: z.boolean().default(false),
          idempotencyKey: idempotencyKey.optional(),
        })
        .strict(),
      output: sandboxSnapshotSchema,
    }),
    quotas: method({
      kind: 'query',
      summary: 'A tenant’s sandbox quotas on a pool (sandboxes, vCPUs, memory) and what it holds',
      access: { action: 'compute:sandboxes:read' },
      tenantScoped: true,
      resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
      input: z.object({ tenantId, poolId: idOf('pool'), subjectTenantId: tenantId.optional() }).strict(),
      output: pageOf(sandboxQuotaSchema),
    }),
    setQuota: method({
      kind: 'mutation',
      summary: 'Limit what a tenant holds in sandboxes on a pool you own (null clears the limit)',
      tenantScoped: true,
      access: { action: 'compute:sandboxes:set-quota' },
      resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
      namesTenants: ['subjectTenantId'],
      input: z
        .object({
          tenantId,
          poolId: idOf('pool'),
          subjectTenantId: tenantId,
          resource: sandboxQuotaResource,
          limit: z.number().int().min(0).max(2_147_483_647).nullable(),
        })
        .strict(),
      output: sandboxQuotaSchema,
    }),
    exec: method({
      kind: 'mutation',
      summary: 'An OpenSSH certificate for your key and a single-use tunnel to the sandbox’s SSH server',
      access: { action: SANDBOX_EXEC_ACTION },
      tenantScoped: true,
      resource: sandboxResource,
      input: z
        .object({
          tenantId,
          sandboxId: idOf('sandbox'),
          /** Your OpenSSH public key line; never a private key. */
          publicKey: z.string().min(1).max(16_384),
          minutes: z
            .number()
            .int()
            .min(SANDBOX_EXEC_MIN_MINUTES)
            .max(SANDBOX_EXEC_MAX_MINUTES)
            .default(SANDBOX_EXEC_DEFAULT_MINUTES)
            .describe(
              'How long the certificate is valid, in minutes (1 to 15, default 10); never past your session',
            ),
        })
        .strict(),
      output: sandboxExecGrantSchema.extend({ account: unixAccount }),
    }),
  },
);

export const sandboxSnapshotsGroup = defineGroup(
  'sandboxSnapshots',
  { module: 'sandboxes' },
  {
    list: method({
      kind: 'query',
      summary: 'List your sandbox snapshots (the tenant’s with all), kept ones of deleted sandboxes too',
      access: { action: 'compute:sandboxes:read' },
      tenantScoped: true,
      input: z
        .object({
          tenantId,
          all: z.boolean().default(false),
          sandboxId: idOf('sandbox').optional(),
          ...pageInputById('snapshot'),
        })
        .strict(),
      output: pageOf(sandboxSnapshotSchema),
    }),
    get: method({
      kind: 'query',
      summary: 'Show a sandbox snapshot',
      access: { action: 'compute:sandboxes:read' },
      tenantScoped: true,
      resource: snapshotResource,
      input: z.object({ tenantId, snapshotId: idOf('snapshot') }).strict(),
      output: sandboxSnapshotSchema,
    }),
    delete: method({
      kind: 'mutation',
      summary: 'Delete a sandbox snapshot and its files on the node',
      access: { action: 'compute:sandboxes:snapshot' },
      tenantScoped: true,
      resource: snapshotResource,
      input: z.object({ tenantId, snapshotId: idOf('snapshot') }).strict(),
      output: sandboxSnapshotSchema,
    }),
  },
);

export const sandboxVolumesGroup = defineGroup(
  'sandboxVolumes',
  { module: 'sandboxes' },
  {
    list: method({
      kind: 'query',
      summary: 'List your sandbox volumes (the tenant’s with all)',
      access: { action: 'compute:sandboxes:read' },
      tenantScoped: true,
      input: z
        .object({
          tenantId,
          all: z.boolean().default(false),
          poolId: idOf('pool').optional(),
          deleted: z.boolean().default(false),
          ...pageInputById('volume'),
        })
        .strict(),
      output: pageOf(sandboxVolumeSchema),
    }),
    get: method({
      kind: 'query',
      summary: 'Show a sandbox volume',
      access: { action: 'compute:sandboxes:read' },
      tenantScoped: true,
      resource: volumeResource,
      input: z.object({ tenantId, volumeId: idOf('volume') }).strict(),
      output: sandboxVolumeSchema,
    }),
    create: method({
      kind: 'mutation',
      summary: 'Create a persistent volume on a node of a pool',
      access: { action: 'compute:sandboxes:volumes' },
      tenantScoped: true,
      idempotent: true,
      input: z
        .object({
          tenantId,
          poolId: idOf('pool'),
          name: resourceName,
          sizeGiB: z.number().int().min(MIN_VOLUME_GIB).max(MAX_VOLUME_GIB),
          idempotencyKey: idempotencyKey.optional(),
        })
        .strict(),
      output: sandboxVolumeSchema,
    }),
    resize: method({
      kind: 'mutation',
      summary: 'Grow a volume (it never shrinks)',
      access: { action: 'compute:sandboxes:volumes' },
      tenantScoped: true,
      resource: volumeResource,
      input: z
        .object({
          tenantId,
          volumeId: idOf('volume'),
          sizeGiB: z.number().int().min(MIN_VOLUME_GIB).max(MAX_VOLUME_GIB),
          ifVersion,
        })
        .strict(),
      output: sandboxVolumeSchema,
    }),
    delete: method({
      kind: 'mutation',
      summary: 'Delete a volume no template mounts, and wipe its data',
      access: { action: 'compute:sandboxes:volumes' },
      tenantScoped: true,
      resource: volumeResource,
      input: z.object({ tenantId, volumeId: idOf('volume'), ifVersion }).strict(),
      output: sandboxVolumeSchema,
    }),
  },
);
