/**
 * The `flavors` group: the shapes a VPS pool offers its instances (vCPUs, memory, disk, and
 * optionally GPUs). Flavors are pool management: the pool's owner creates, updates and deletes
 * them; a tenant the pool is offered to lists them. A flavor an instance uses is never deleted.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';
import { imageChannel, imageOs } from './images.js';
import { ifVersion } from './sites.js';

const MAX_FLAVOR_GPUS = 16;

export const flavorSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  poolId: z.string(),
  name: z.string(),
  vcpus: z.number().int(),
  memoryMiB: z.number().int(),
  diskGiB: z.number().int(),
  gpus: z.number().int(),
  gpuModel: z.string().nullable(),
  description: z.string(),
  /**
   * The image an instance of the flavor boots when its create names none: the newest image of
   * this OS on this channel, picked at each create, so promoting a newer image moves the flavor on.
   */
  image: z.object({ os: z.string(), channel: imageChannel }).nullable(),
  version: z.number().int(),
  createdAt: isoTime,
  updatedAt: isoTime,
});

/** A deprecated image boots no new instance, so a flavor follows `testing` or `stable`. */
const flavorImage = z
  .object({ os: imageOs, channel: z.enum(['testing', 'stable']) })
  .strict()
  .describe('The image an instance boots when its create names none: the newest of this os on this channel');

const flavorName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'must be 1-63 lower-case letters, digits and . _ - (small, gpu.1)')
  .describe(
    'The flavor’s name, unique in its pool: 1-63 lower-case letters, digits and . _ - (small, gpu.1)',
  );
const vcpus = z
  .number()
  .int()
  .min(1)
  .max(256)
  .describe('The vCPUs an instance of the flavor gets (1 to 256)');
const memoryMiB = z
  .number()
  .int()
  .min(128)
  .max(4 * 1024 * 1024)
  .describe('The memory an instance of the flavor gets, in MiB (128 to 4,194,304)');
const diskGiB = z
  .number()
  .int()
  .min(1)
  .max(65536)
  .describe('The disk an instance of the flavor gets, in GiB (1 to 65,536)');
const gpus = z
  .number()
  .int()
  .min(0)
  .max(MAX_FLAVOR_GPUS)
  .describe(`The GPUs an instance of the flavor gets (0 to ${MAX_FLAVOR_GPUS})`);
const gpuModel = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'must be a GPU model name such as H100')
  .describe('The model of the flavor’s GPUs, like H100');
const description = z
  .string()
  .max(500)
  .regex(/^[^\u0000-\u0008\u000b-\u001f\u007f]*$/, 'must not hold control characters')
  .describe('What the flavor is for, for people (up to 500 characters)');

/** A flavor's writable fields, shared with the FleetConfig document (fleet-config.ts). */
export const flavorFields = {
  flavorImage,
  flavorName,
  vcpus,
  memoryMiB,
  diskGiB,
  gpus,
  gpuModel,
  description,
};

const flavorResource = (input: { flavorId: string }) => ({ type: 'compute-flavor', id: input.flavorId });

export const flavorsGroup = defineGroup(
  'flavors',
  { module: 'vps' },
  {
    list: method({
      kind: 'query',
      summary: 'List a VPS pool’s flavors',
      tenantScoped: true,
      input: z
        .object({ tenantId, poolId: idOf('pool'), name: flavorName.optional(), ...pageInputById('flavor') })
        .strict(),
      output: pageOf(flavorSchema),
    }),
    create: method({
      kind: 'mutation',
      summary: 'Add a flavor to a VPS pool you own',
      tenantScoped: true,
      input: z
        .object({
          tenantId,
          poolId: idOf('pool'),
          name: flavorName,
          vcpus,
          memoryMiB,
          diskGiB,
          gpus: gpus.default(0),
          gpuModel: gpuModel.optional(),
          description: description.default(''),
          image: flavorImage.optional(),
        })
        .strict(),
      output: flavorSchema,
    }),
    update: method({
      kind: 'mutation',
      summary: 'Change a flavor (instances take the new shape at their next resize)',
      tenantScoped: true,
      resource: flavorResource,
      input: z
        .object({
          tenantId,
          flavorId: idOf('flavor'),
          vcpus: vcpus.optional(),
          memoryMiB: memoryMiB.optional(),
          diskGiB: diskGiB.optional(),
          gpus: gpus.optional(),
          gpuModel: gpuModel
            .nullable()
            .optional()
            .describe('The model of the flavor’s GPUs, like H100, or null to clear it'),
          description: description.optional(),
          /** Null: instances of the flavor must name their image. */
          image: flavorImage
            .nullable()
            .optional()
            .describe(
              'The image an instance boots when its create names none (os and channel), or null: each names its own',
            ),
          ifVersion,
        })
        .strict(),
      output: flavorSchema,
    }),
    delete: method({
      kind: 'mutation',
      summary: 'Delete a flavor no instance uses',
      tenantScoped: true,
      resource: flavorResource,
      input: z.object({ tenantId, flavorId: idOf('flavor'), ifVersion }).strict(),
      output: z.object({ id: z.string(), deleted: z.literal(true) }),
    }),
  },
);
