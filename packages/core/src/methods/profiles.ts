/**
 * The `profiles` group: provision profiles, a tenant's JSON documents that say what a bare-metal
 * machine becomes when it is deployed (docs/profiles.md): its disk layout, the image written to it,
 * cloud-init user data, packages and SSH keys, and the pool, labels and join token reference of the
 * `bcd` it joins with. The join token is a secret reference (`secret://TENANT/sec_…`), never a
 * value. Every object of a document is strict, so a misspelt field is refused with its path.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idempotencyKey, idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';
import { ifVersion, labels, resourceName } from './sites.js';

export const PROFILES_WRITE_ACTION = 'compute:profiles:write';
/** The most profiles a tenant keeps. */
export const MAX_PROFILES_PER_TENANT = 500;
/** The most bytes of cloud-init user data a profile carries (UTF-8). */
export const MAX_PROFILE_USER_DATA_BYTES = 32_768;
/** The most partitions a disk layout holds. */
export const MAX_PROFILE_PARTITIONS = 16;
/** The file systems a partition is made with. */
export const PROFILE_FILESYSTEMS = ['ext4', 'xfs', 'btrfs', 'vfat', 'swap'] as const;

const MIB_PER_TIB = 1024 * 1024;

/** A device path: /dev/sda, /dev/nvme0n1, /dev/disk/by-id/…; no dot segments, no spaces. */
const devicePath = z
  .string()
  .max(255)
  .regex(
    /^\/dev\/(?!.*(^|\/)\.\.?(\/|$))[A-Za-z0-9][A-Za-z0-9._:+@-]*(\/[A-Za-z0-9._:+@-]+)*$/,
    'must be a device path under /dev such as /dev/sda or /dev/disk/by-id/…',
  );

/** A mount point: an absolute path of plain segments (no `.`, `..`, spaces or control characters). */
const mountPoint = z
  .string()
  .max(255)
  .regex(
    /^\/((?!\.\.?(\/|$))[A-Za-z0-9._-]+(\/(?!\.\.?(\/|$))[A-Za-z0-9._-]+)*)?$/,
    'must be an absolute path of letters, digits and . _ - segments, such as / or /var/lib',
  );

const target = z
  .object({
    path: devicePath.optional().describe('The disk by its device path, such as /dev/disk/by-id/…'),
    bySize: z
      .enum(['smallest', 'largest'])
      .optional()
      .describe('Or pick the smallest or largest writable disk, within minGiB and maxGiB'),
    minGiB: z
      .number()
      .int()
      .min(1)
      .max(1_048_576)
      .optional()
      .describe('With bySize: disks at least this big'),
    maxGiB: z.number().int().min(1).max(1_048_576).optional().describe('With bySize: disks at most this big'),
  })
  .strict()
  .superRefine((value, ctx) => {
    if ((value.path === undefined) === (value.bySize === undefined))
      ctx.addIssue({ code: 'custom', message: 'give exactly one of path and bySize', path: ['path'] });
    if (value.path !== undefined && (value.minGiB !== undefined || value.maxGiB !== undefined))
      ctx.addIssue({ code: 'custom', message: 'minGiB and maxGiB go with bySize only', path: ['minGiB'] });
    if (value.minGiB !== undefined && value.maxGiB !== undefined && value.minGiB > value.maxGiB)
      ctx.addIssue({ code: 'custom', message: 'must not be above maxGiB', path: ['minGiB'] });
  })
  .describe('The disk the layout is written to: by device path, or by a size rule');

const partition = z
  .object({
    label: z
      .string()
      .regex(
        /^[a-z][a-z0-9-]{0,10}$/,
        'must be 1-11 lower-case letters, digits and dashes, starting with a letter (it names the partition and its file system)',
      )
      .describe('The partition’s name (GPT name and file system label), such as root or efi'),
    sizeMiB: z
      .number()
      .int('must be a whole number of MiB')
      .min(1, 'must be at least 1 MiB')
      .max(64 * MIB_PER_TIB, 'must be at most 64 TiB')
      .optional()
      .describe('Its size in MiB; the last partition may leave it out to take the rest of the disk'),
    filesystem: z
      .enum(PROFILE_FILESYSTEMS)
      .describe('The file system it is made with: ext4, xfs, btrfs, vfat or swap'),
    mount: mountPoint.optional().describe('Where it is mounted, such as / or /boot/efi (never for swap)'),
  })
  .strict();

const disk = z
  .object({
    target,
    partitions: z
      .array(partition)
      .min(1, 'must hold at least one partition')
      .max(MAX_PROFILE_PARTITIONS, `must hold at most ${MAX_PROFILE_PARTITIONS} partitions`)
      .describe('The partitions in disk order (a GPT table)'),
  })
  .strict()
  .superRefine((value, ctx) => {
    const labelsSeen = new Set<string>();
    const mounts = new Set<string>();
    value.partitions.forEach((part, index) => {
      const at = (field: string) => ['partitions', index, field];
      if (labelsSeen.has(part.label))
        ctx.addIssue({ code: 'custom', message: `label ${part.label} is given twice`, path: at('label') });
      labelsSeen.add(part.label);
      if (part.sizeMiB === undefined && index !== value.partitions.length - 1)
        ctx.addIssue({
          code: 'custom',
          message: 'only the last partition may leave sizeMiB out (it takes the rest of the disk)',
          path: at('sizeMiB'),
        });
      if (part.filesystem === 'swap' && part.mount !== undefined)
        ctx.addIssue({ code: 'custom', message: 'a swap partition is not mounted', path: at('mount') });
      if (part.mount !== undefined) {
        if (mounts.has(part.mount))
          ctx.addIssue({ code: 'custom', message: `${part.mount} is mounted twice`, path: at('mount') });
        mounts.add(part.mount);
      }
    });
    if (!mounts.has('/'))
      ctx.addIssue({ code: 'custom', message: 'one partition must be mounted at /', path: ['partitions'] });
    const total = value.partitions.reduce((sum, part) => sum + (part.sizeMiB ?? 0), 0);
    if (total > 64 * MIB_PER_TIB)
      ctx.addIssue({
        code: 'custom',
        message: 'the partitions add up to more than 64 TiB',
        path: ['partitions'],
      });
  })
  .describe('The disk layout: a target disk and its partitions');

const image = z
  .object({
    imageId: idOf('image').optional().describe('A catalog image’s id, img_…'),
    name: z
      .string()
      .regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'must be an image name such as debian-12')
      .optional()
      .describe('Or a catalog image’s name, with its digest'),
    digest: z
      .string()
      .regex(/^sha256:[0-9a-f]{64}$/, 'must be sha256: and 64 lower-case hex digits')
      .optional()
      .describe('With name: the image’s digest, sha256:…, which the catalog image must have'),
  })
  .strict()
  .superRefine((value, ctx) => {
    if (value.imageId !== undefined) {
      if (value.name !== undefined || value.digest !== undefined)
        ctx.addIssue({
          code: 'custom',
          message: 'give imageId, or name and digest, not both',
          path: ['imageId'],
        });
    } else if (value.name === undefined || value.digest === undefined)
      ctx.addIssue({
        code: 'custom',
        message: 'give imageId, or both name and digest',
        path: [value.name === undefined ? 'name' : 'digest'],
      });
  })
  .describe('The image written to the disk: a catalog image by id, or by name pinned to its digest');

const userData = z
  .string()
  .refine(
    (text) => new TextEncoder().encode(text).length <= MAX_PROFILE_USER_DATA_BYTES,
    `must be at most ${MAX_PROFILE_USER_DATA_BYTES} bytes`,
  )
  .refine(
    (text) => text.startsWith('#cloud-config\n') || text.startsWith('#!'),
    'must be a cloud-config document (starting with a "#cloud-config" line) or a script (starting with #!)',
  )
  .describe('cloud-init user data: a #cloud-config document or a #! script, merged after the profile’s own');

const packageName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9+.-]{1,99}$/, 'must be a Debian package name such as htop');

const sshKey = z
  .string()
  .max(8192, 'must be at most 8,192 characters')
  .regex(
    /^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,3}( [\x20-\x7e]{1,200})?$/,
    'must be one OpenSSH public key line: type, base64 key and an optional comment',
  );

const secretRef = z
  .string()
  .regex(
    /^secret:\/\/[a-z0-9][a-z0-9-]{0,62}\/sec_[0-9a-z]{26}$/,
    'must be a secret reference, secret://TENANT/sec_… (put the token with better-compute secrets put)',
  );

/** A provision profile's document, as created, updated, validated and rendered. */
export const profileDocument = z
  .object({
    name: resourceName.describe(
      'The profile’s name: 1-63 lower-case letters, digits and dashes, unique in its tenant',
    ),
    description: z.string().max(1000).optional().describe('What the profile is for, for people'),
    image,
    disk,
    userData: userData.optional(),
    packages: z
      .array(packageName)
      .max(200, 'must name at most 200 packages')
      .refine((list) => new Set(list).size === list.length, 'must not name a package twice')
      .optional()
      .describe('Debian packages installed at first boot'),
    node: z
      .object({
        poolId: idOf('pool').describe('The pool the machine joins, one the tenant owns'),
        labels: labels.optional().describe('The labels the node joins with'),
      })
      .strict()
      .describe('The node the machine becomes: its pool and labels'),
    joinTokenRef: secretRef.describe(
      'The join token bcd joins with, as a reference to the tenant’s secret holding it: secret://TENANT/sec_…',
    ),
    sshKeys: z
      .array(sshKey)
      .max(32, 'must hold at most 32 keys')
      .optional()
      .describe('OpenSSH public keys authorized for the default user'),
  })
  .strict()
  .describe('A provision profile document (docs/profiles.md)');

export type ProfileDocument = z.output<typeof profileDocument>;

/** A profile as get, create and update answer it. */
export const profileSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  name: z.string(),
  /** 1 when created; each update adds one. */
  version: z.number().int(),
  /** SHA-256 of the document's canonical JSON (keys sorted), hex. */
  documentSha256: z.string(),
  document: profileDocument,
  createdAt: isoTime,
  updatedAt: isoTime,
});

/** A profile as list shows it: without its document. */
const profileSummarySchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  name: z.string(),
  version: z.number().int(),
  poolId: z.string(),
  image: z.string(),
  documentSha256: z.string(),
  updatedAt: isoTime,
});

/** One file of a rendered profile: its path below the render's root, mode, size, digest and text. */
const renderedFileSchema = z.object({
  path: z.string(),
  /** Octal, such as 0644. */
  mode: z.string(),
  bytes: z.number().int(),
  sha256: z.string(),
  content: z.string(),
});

const profileRenderSchema = z.object({
  profileId: z.string().nullable(),
  version: z.number().int().nullable(),
  documentSha256: z.string(),
  /** SHA-256 of manifest.json, the file that lists every other file's digest. */
  manifestSha256: z.string(),
  files: z.array(renderedFileSchema),
});

const profileValidationSchema = z.object({
  valid: z.literal(true),
  name: z.string(),
  documentSha256: z.string(),
  pool: z.object({ id: z.string(), name: z.string() }),
  image: z.object({ id: z.string(), name: z.string(), sha256: z.string() }),
  joinTokenSecret: z.object({ id: z.string() }),
  /** The stored profile of the same name, if any: update it rather than create another. */
  existing: z.object({ id: z.string(), version: z.number().int() }).nullable(),
});

const profileResource = (input: { profileId?: string | undefined; name?: string | undefined }) => ({
  type: 'compute-profile',
  id: input.profileId ?? input.name,
});

/** A profile named by its id or its name (exactly one). */
const named = {
  profileId: idOf('profile').optional().describe('The profile’s id, prof_…; or give name'),
  name: resourceName.optional().describe('The profile’s name in its tenant; or give profileId'),
};
const oneOf = (input: { profileId?: string | undefined; name?: string | undefined }) =>
  (input.profileId === undefined) !== (input.name === undefined);
const ONE_OF = { message: 'give exactly one of profileId and name', path: ['profileId'] };

const profilesList = method({
  kind: 'query',
  summary: 'List the tenant’s provision profiles',
  tenantScoped: true,
  input: z
    .object({
      tenantId,
      poolId: idOf('pool').optional().describe('Only profiles whose machines join this pool'),
      ...pageInputById('profile'),
    })
    .strict(),
  output: pageOf(profileSummarySchema),
});

const profilesGet = method({
  kind: 'query',
  summary: 'Show a provision profile and its document',
  tenantScoped: true,
  resource: profileResource,
  input: z
    .object({ tenantId, ...named })
    .strict()
    .refine(oneOf, ONE_OF),
  output: profileSchema,
});

const profilesValidate = method({
  kind: 'query',
  summary:
    'Check a provision profile document without storing it: its fields, and that its pool, image and join token secret exist for the tenant',
  tenantScoped: true,
  input: z.object({ tenantId, document: profileDocument }).strict(),
  output: profileValidationSchema,
});

const profilesRender = method({
  kind: 'query',
  summary:
    'The exact files a machine deployed with a profile receives (layout, partition script, fstab, cloud-init, bcd join config, manifest), byte for byte',
  tenantScoped: true,
  resource: profileResource,
  input: z
    .object({
      tenantId,
      ...named,
      document: profileDocument.optional().describe('Or render a document that is not stored'),
    })
    .strict()
    .refine(
      (input) =>
        [input.profileId, input.name, input.document].filter((value) => value !== undefined).length === 1,
      { message: 'give exactly one of profileId, name and document', path: ['profileId'] },
    ),
  output: profileRenderSchema,
});

const profilesCreate = method({
  kind: 'mutation',
  summary: 'Store a provision profile from its document',
  access: { action: PROFILES_WRITE_ACTION },
  tenantScoped: true,
  idempotent: true,
  input: z
    .object({ tenantId, document: profileDocument, idempotencyKey: idempotencyKey.optional() })
    .strict(),
  output: profileSchema,
});

const profilesUpdate = method({
  kind: 'mutation',
  summary: 'Replace a provision profile’s document (a new version); machines deployed before keep theirs',
  access: { action: PROFILES_WRITE_ACTION },
  tenantScoped: true,
  resource: profileResource,
  input: z
    .object({ tenantId, ...named, document: profileDocument, ifVersion })
    .strict()
    .refine(oneOf, ONE_OF),
  output: profileSchema,
});

const profilesDelete = method({
  kind: 'mutation',
  summary: 'Delete a provision profile no deploying or active machine uses',
  access: { action: PROFILES_WRITE_ACTION },
  tenantScoped: true,
  resource: profileResource,
  input: z
    .object({ tenantId, ...named, ifVersion })
    .strict()
    .refine(oneOf, ONE_OF),
  output: z.object({ id: z.string(), name: z.string(), deleted: z.literal(true) }),
});

/** The `profiles` group: each method's name and route (`/profiles/…`) come from here. */
export const profilesGroup = defineGroup(
  'profiles',
  { module: 'metal' },
  {
    list: profilesList,
    get: profilesGet,
    validate: profilesValidate,
    render: profilesRender,
    create: profilesCreate,
    update: profilesUpdate,
    delete: profilesDelete,
  },
);
