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
import { SECRETS_USE_ACTION } from './secrets.js';
import {
  sandboxRuntime,
  MAX_CREATE_WAIT_SECONDS,
  MAX_SANDBOX_TTL_SECONDS,
  MIN_VOLUME_GIB,
  MAX_VOLUME_GIB,
  SANDBOX_EXEC_MIN_MINUTES,
  SANDBOX_EXEC_MAX_MINUTES,
  SANDBOX_EXEC_DEFAULT_MINUTES,
  SANDBOX_MANAGE_ACTION,
  SANDBOX_EXEC_ACTION,
  SANDBOX_ATTACH_ACTION,
  ttlSeconds,
  sandboxTemplateSchema,
  sandboxSnapshotSchema,
  sandboxSchema,
  sandboxVolumeSchema,
  sandboxQuotaResource,
  sandboxQuotaSchema,
  sandboxExecGrantSchema,
  templateFields,
} from './sandbox-schemas.js';

export * from './sandbox-schemas.js';

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
      alsoActions: [SANDBOX_ATTACH_ACTION, SECRETS_USE_ACTION],
      tenantScoped: true,
      idempotent: true,
      input: z
        .object({
          tenantId,
          name: resourceName,
          poolId: idOf('pool'),
          runtime: sandboxRuntime
            .default('bwrap')
            .describe(
              'What runs its sandboxes: bwrap (bubblewrap, disk snapshots only) or qemu (a guest, memory too)',
            ),
          ...templateFields,
          userData: templateFields.userData.default(null),
          defaultTtlSeconds: templateFields.defaultTtlSeconds.default(3600),
          maxTtlSeconds: templateFields.maxTtlSeconds.default(4 * 3600),
          warmMin: templateFields.warmMin.default(0),
          warmMax: templateFields.warmMax.optional(),
          env: templateFields.env.default([]),
          network: templateFields.network.default('egress'),
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
      alsoActions: [SANDBOX_ATTACH_ACTION, SECRETS_USE_ACTION],
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
          all: z.boolean().default(false).describe('The whole tenant’s sandboxes, not only yours'),
          deleted: z.boolean().default(false).describe('Deleted sandboxes too'),
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
          ttlSeconds: ttlSeconds
            .optional()
            .describe(
              'Its lifetime in seconds (60 to 604,800, within the template’s maximum); the template’s default when omitted',
            ),
          fromSnapshotId: idOf('snapshot').optional(),
          /** Seconds to wait for a cold sandbox to be ready; 0 answers at once, while it starts. */
          waitSeconds: z
            .number()
            .int()
            .min(0)
            .max(MAX_CREATE_WAIT_SECONDS)
            .default(10)
            .describe(
              'How long to wait for a cold sandbox to be ready, in seconds (0 to 30); 0 answers at once',
            ),
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
          bySeconds: z
            .number()
            .int()
            .min(1)
            .max(MAX_SANDBOX_TTL_SECONDS)
            .optional()
            .describe('Seconds to add to its current expiry (1 to 604,800); give this or until'),
          until: isoTime
            .optional()
            .describe(
              'The new expiry, an ISO 8601 time within the template’s maximum; give this or bySeconds',
            ),
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
          memory: z
            .boolean()
            .optional()
            .describe(
              'Snapshot its memory as well as its disk (qemu only); what the runtime can when omitted',
            ),
          keep: z.boolean().default(false).describe('Keep the snapshot after its sandbox is deleted'),
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
          resource: sandboxQuotaResource.describe('What the quota counts: sandboxes, vcpus or memoryMiB'),
          limit: z
            .number()
            .int()
            .min(0)
            .max(2_147_483_647)
            .nullable()
            .describe('The most the tenant may hold of it on the pool, or null to clear the limit'),
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
          publicKey: z
            .string()
            .min(1)
            .max(16_384)
            .describe('Your OpenSSH public key line, like ssh-ed25519 AAAA… comment; never a private key'),
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
          all: z.boolean().default(false).describe('The whole tenant’s snapshots, not only yours'),
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

/**
 * Volumes are decided on their group's own actions (compute:sandbox-volumes:create, resize,
 * delete), so a role can let someone make volumes and manage only their own
 * (`compute:sandbox-volumes:*@own`, decided with the volume's owner) as members do; reading them
 * is compute:sandboxes:read, as every sandbox read (docs/decisions/member-volumes.md).
 */
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
          all: z.boolean().default(false).describe('The whole tenant’s volumes, not only yours'),
          poolId: idOf('pool').optional(),
          deleted: z.boolean().default(false).describe('Deleted volumes too'),
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
      tenantScoped: true,
      idempotent: true,
      input: z
        .object({
          tenantId,
          poolId: idOf('pool'),
          name: resourceName,
          sizeGiB: z
            .number()
            .int()
            .min(MIN_VOLUME_GIB)
            .max(MAX_VOLUME_GIB)
            .describe('The volume’s size in GiB (1 to 16,384)'),
          idempotencyKey: idempotencyKey.optional(),
        })
        .strict(),
      output: sandboxVolumeSchema,
    }),
    resize: method({
      kind: 'mutation',
      summary: 'Grow a volume (it never shrinks)',
      tenantScoped: true,
      resource: volumeResource,
      input: z
        .object({
          tenantId,
          volumeId: idOf('volume'),
          sizeGiB: z
            .number()
            .int()
            .min(MIN_VOLUME_GIB)
            .max(MAX_VOLUME_GIB)
            .describe('The new size in GiB (1 to 16,384), larger than now: a volume only grows'),
          ifVersion,
        })
        .strict(),
      output: sandboxVolumeSchema,
    }),
    delete: method({
      kind: 'mutation',
      summary: 'Delete a volume no template mounts, and wipe its data',
      tenantScoped: true,
      resource: volumeResource,
      input: z.object({ tenantId, volumeId: idOf('volume'), ifVersion }).strict(),
      output: sandboxVolumeSchema,
    }),
  },
);
