/**
 * The `instances` group: VPS instances, virtual machines on a node of a VPS pool. An instance is
 * `provisioning` while its node fetches the image, makes its disk and boots it, then `running`;
 * `stopping` and `stopped`; `deleting` and `deleted`; `failed` with a reason when a step on its
 * node failed. Every change runs as a workflow on the instance's node.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idempotencyKey, idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';
import { ifVersion } from './sites.js';

/** The most user data an instance takes, in characters. */
const MAX_USER_DATA = 32_768;

export const instanceState = z.enum([
  'provisioning',
  'running',
  'stopping',
  'stopped',
  'deleting',
  'deleted',
  'failed',
]);

export const instanceSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  poolId: z.string(),
  nodeId: z.string(),
  flavorId: z.string(),
  imageId: z.string(),
  name: z.string(),
  state: instanceState,
  /** Why it failed, while failed. */
  reason: z.string().nullable(),
  vcpus: z.number().int(),
  memoryMiB: z.number().int(),
  diskGiB: z.number().int(),
  gpus: z.number().int(),
  /** The reservation holding its GPUs, for a flavor with GPUs. */
  reservationId: z.string().nullable(),
  /** The workflow running its last change. */
  workflowId: z.string().nullable(),
  /** The guest's address, once it answered. */
  address: z.string().nullable(),
  /**
   * A loopback port on the node forwarded to the guest's SSH, while it runs; null on the qemu
   * runtime, where the node reaches the guest at its private address (`address`).
   */
  sshPort: z.number().int().nullable(),
  /** Whether the guest may open connections beyond its node; it never reaches the node itself. */
  egress: z.boolean(),
  version: z.number().int(),
  ownerId: z.string().nullable(),
  agentId: z.string().nullable(),
  createdAt: isoTime,
  updatedAt: isoTime,
  deletedAt: isoTime.nullable(),
});

/** A host name: what the guest calls itself (the NoCloud seed's hostname). */
const instanceName = z
  .string()
  .regex(
    /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/,
    'must be a host name: 1-63 lower-case letters, digits and -, not starting or ending with -',
  );

/**
 * An OpenSSH public key line: a key type, its base64 and an optional plain comment, on one line.
 * The same rule the node applies before it writes the key into the guest's NoCloud seed, so a key
 * the node would refuse is refused here, before anything is placed.
 */
const sshPublicKey = z
  .string()
  .max(8192)
  .regex(
    /^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,3}( [A-Za-z0-9 @._+=:-]*)?$/,
    'must be one OpenSSH public key line (ssh-ed25519 AAAA… comment; the comment in letters, digits and @ . _ + = : -)',
  );

const instanceQuotaResource = z.enum(['instances', 'vcpus', 'memoryMiB']);

const instanceQuotaSchema = z.object({
  tenantId: z.string(),
  poolId: z.string(),
  resource: instanceQuotaResource,
  limit: z.number().int().nullable(),
  used: z.number().int(),
});

const instanceResource = (input: { instanceId: string }) => ({
  type: 'compute-instance',
  id: input.instanceId,
});
const ref = { tenantId, instanceId: idOf('instance'), ifVersion };

export const instancesGroup = defineGroup(
  'instances',
  { module: 'vps' },
  {
    list: method({
      kind: 'query',
      summary: 'List the tenant’s instances, newest first (deleted ones only when asked)',
      tenantScoped: true,
      input: z
        .object({
          tenantId,
          state: instanceState.optional().describe('Only instances in this state; all when omitted'),
          poolId: idOf('pool').optional(),
          ...pageInputById('instance'),
        })
        .strict(),
      output: pageOf(instanceSchema),
    }),
    get: method({
      kind: 'query',
      summary: 'Show an instance',
      tenantScoped: true,
      resource: instanceResource,
      input: z.object({ tenantId, instanceId: idOf('instance') }).strict(),
      output: instanceSchema,
    }),
    create: method({
      kind: 'mutation',
      summary: 'Create an instance of a flavor and image on a VPS pool, and boot it',
      tenantScoped: true,
      idempotent: true,
      input: z
        .object({
          tenantId,
          poolId: idOf('pool'),
          flavorId: idOf('flavor'),
          /** Left out: the newest image on the flavor's channel (flavors `image`). */
          imageId: idOf('image').optional(),
          name: instanceName.describe(
            'Its host name, what the guest calls itself: 1-63 lower-case letters, digits and -',
          ),
          sshKeys: z
            .array(sshPublicKey)
            .max(32)
            .default([])
            .describe(
              'OpenSSH public key lines that may log in, like ssh-ed25519 AAAA… comment (at most 32)',
            ),
          /** Within the 64 KiB body of a call, with room for the rest of the input. */
          userData: z
            .string()
            .max(MAX_USER_DATA)
            .nullable()
            .default(null)
            .describe(
              'Cloud-init user data for its first boot: a #! script or a #cloud-config (up to 32,768 characters)',
            ),
          /** Off: the guest opens no connection beyond its node (the node still reaches it). */
          egress: z
            .boolean()
            .default(true)
            .describe(
              'Whether the guest may open connections beyond its node; the node reaches it either way',
            ),
          idempotencyKey: idempotencyKey.optional(),
        })
        .strict(),
      output: instanceSchema,
    }),
    start: method({
      kind: 'mutation',
      summary: 'Boot a stopped instance',
      tenantScoped: true,
      resource: instanceResource,
      input: z.object(ref).strict(),
      output: instanceSchema,
    }),
    stop: method({
      kind: 'mutation',
      summary: 'Power a running instance off: ACPI, then by force after the timeout',
      tenantScoped: true,
      resource: instanceResource,
      input: z
        .object({
          ...ref,
          timeoutSeconds: z
            .number()
            .int()
            .min(0)
            .max(3600)
            .default(60)
            .describe(
              'How long to wait for an ACPI shutdown before powering off by force, in seconds (0 to 3,600)',
            ),
        })
        .strict(),
      output: instanceSchema,
    }),
    delete: method({
      kind: 'mutation',
      summary: 'Delete an instance: stop it, remove its disk and free its place',
      tenantScoped: true,
      resource: instanceResource,
      input: z.object(ref).strict(),
      output: instanceSchema,
    }),
    resize: method({
      kind: 'mutation',
      summary: 'Give a stopped instance another flavor of its pool (its disk only grows)',
      tenantScoped: true,
      resource: instanceResource,
      input: z.object({ ...ref, flavorId: idOf('flavor') }).strict(),
      output: instanceSchema,
    }),
    quotas: method({
      kind: 'query',
      summary: 'A tenant’s instance quotas on a pool (instances, vCPUs, memory) and what it holds',
      tenantScoped: true,
      resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
      input: z.object({ tenantId, poolId: idOf('pool'), subjectTenantId: tenantId.optional() }).strict(),
      output: pageOf(instanceQuotaSchema),
    }),
    setQuota: method({
      kind: 'mutation',
      summary: 'Limit what a tenant holds in instances on a pool you own (null clears the limit)',
      tenantScoped: true,
      access: { action: 'compute:instances:set-quota' },
      resource: (input) => ({ type: 'compute-pool', id: input.poolId }),
      namesTenants: ['subjectTenantId'],
      input: z
        .object({
          tenantId,
          poolId: idOf('pool'),
          subjectTenantId: tenantId,
          resource: instanceQuotaResource.describe('What the quota counts: instances, vcpus or memoryMiB'),
          limit: z
            .number()
            .int()
            .min(0)
            .max(2_147_483_647)
            .nullable()
            .describe('The most the tenant may hold of it on the pool, or null to clear the limit'),
        })
        .strict(),
      output: instanceQuotaSchema,
    }),
  },
);
