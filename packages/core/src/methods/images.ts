/**
 * The `images` group: the catalog of machine images instances boot. A tenant registers its own;
 * the root tenant's images are the platform's, shared with every tenant. An image is immutable
 * once registered (its files are named by digest); only its channel moves (`testing` → `stable`).
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idempotencyKey, idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';
import { ifVersion } from './sites.js';

const sha256 = z.string().regex(/^[0-9a-f]{64}$/, 'must be a SHA-256 digest in lower-case hex');
const NO_CONTROL = /^[^\u0000-\u001f\u007f]*$/;

/** Where a node fetches a file: an absolute path on the node, or an https:// URL. */
const imageSource = z
  .string()
  .min(2)
  .max(2048)
  .regex(NO_CONTROL, 'must not hold control characters')
  .refine(
    (s) => (s.startsWith('/') && !s.split('/').includes('..')) || /^https:\/\/[^\s/]+\//.test(s),
    'must be an absolute path on the node (without ..) or an https:// URL',
  );

const imageFileInput = z
  .object({
    source: imageSource,
    sha256,
    sizeBytes: z
      .number()
      .int()
      .positive()
      .max(2 ** 50),
  })
  .strict();

export const imageChannel = z.enum(['testing', 'stable', 'deprecated']);
/** What an image runs (debian-12): the family a flavor's channel picks the newest image of. */
export const imageOs = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9][A-Za-z0-9 ._-]*$/, 'must be letters, digits, spaces and . _ -');
const diskFormat = z.enum(['qcow2', 'raw']);
const architecture = z.enum(['x86_64', 'aarch64']);

const imageBootInput = z
  .object({
    kernel: imageFileInput,
    initrd: imageFileInput.nullable().default(null),
    cmdline: z.string().max(1024).regex(NO_CONTROL, 'must not hold control characters').default(''),
  })
  .strict();

export const imageSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  /** `platform` for the root tenant's images, shared with every tenant. */
  scope: z.enum(['tenant', 'platform']),
  name: z.string(),
  channel: imageChannel,
  diskFormat,
  source: z.string(),
  sha256: z.string(),
  sizeBytes: z.number().int(),
  architecture,
  os: z.string(),
  boot: z
    .object({
      kernel: z.object({ source: z.string(), sha256: z.string(), sizeBytes: z.number().int() }),
      initrd: z.object({ source: z.string(), sha256: z.string(), sizeBytes: z.number().int() }).nullable(),
      cmdline: z.string(),
    })
    .nullable(),
  version: z.number().int(),
  createdAt: isoTime,
  updatedAt: isoTime,
});

const imageName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'must be 1-63 lower-case letters, digits and . _ - (debian-12)');

const imageResource = (input: { imageId: string }) => ({ type: 'compute-image', id: input.imageId });

export const imagesGroup = defineGroup(
  'images',
  { module: 'vps' },
  {
    list: method({
      kind: 'query',
      summary: 'List the images the tenant can boot: its own and the platform’s',
      tenantScoped: true,
      input: z
        .object({
          tenantId,
          channel: imageChannel
            .optional()
            .describe('Only images on this channel: testing, stable or deprecated'),
          name: imageName.optional().describe('Only images of this name, like debian-12'),
          ...pageInputById('image'),
        })
        .strict(),
      output: pageOf(imageSchema),
    }),
    get: method({
      kind: 'query',
      summary: 'Show an image',
      tenantScoped: true,
      resource: imageResource,
      input: z.object({ tenantId, imageId: idOf('image') }).strict(),
      output: imageSchema,
    }),
    register: method({
      kind: 'mutation',
      summary: 'Register an image: its disk (and optional direct-boot kernel) with sizes and digests',
      tenantScoped: true,
      idempotent: true,
      input: z
        .object({
          tenantId,
          name: imageName.describe(
            'The image’s name, unique in the tenant: 1-63 lower-case letters, digits and . _ - (debian-12)',
          ),
          source: imageSource.describe(
            'Where nodes fetch the disk: an absolute path on the node, or an https:// URL',
          ),
          diskFormat: diskFormat.describe('The disk’s format: qcow2 or raw'),
          sha256: sha256.describe('The disk’s SHA-256 digest, 64 lower-case hex digits'),
          sizeBytes: imageFileInput.shape.sizeBytes.describe('The disk file’s size in bytes'),
          architecture: architecture
            .default('x86_64')
            .describe('The CPU architecture it runs on: x86_64 or aarch64'),
          os: imageOs.describe(
            'What the image runs, like debian-12: the family a flavor’s channel picks the newest of',
          ),
          channel: imageChannel
            .default('testing')
            .describe('The channel it starts on: testing, stable or deprecated'),
          boot: imageBootInput
            .optional()
            .describe(
              'A kernel, optional initrd and cmdline to boot directly, each file with its sha256 and size',
            ),
          idempotencyKey: idempotencyKey.optional(),
        })
        .strict(),
      output: imageSchema,
    }),
    promote: method({
      kind: 'mutation',
      summary: 'Move an image to another channel (testing → stable, or deprecated)',
      tenantScoped: true,
      resource: imageResource,
      input: z
        .object({
          tenantId,
          imageId: idOf('image'),
          channel: imageChannel.describe('The channel to move it to: testing, stable or deprecated'),
          ifVersion,
        })
        .strict(),
      output: imageSchema,
    }),
  },
);
