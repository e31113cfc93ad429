/**
 * The `releases` group: signed bcd release manifests in the control plane (docs/releases.md). A
 * release is registered only when a threshold of the deployment's pinned release keys signed it
 * (the configuration's `release.pins`); the server never signs. Releases are the platform's: only
 * the root tenant calls these methods (`platformOnly`), with `compute:releases:read|register`.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import {
  releaseArtifactSchema,
  releaseManifestSchema,
  releasePinStatementSchema,
  releaseSignaturesSchema,
  releaseVersion,
} from '../release/manifest.js';
import { idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';

export const releaseSchema = z.object({
  id: z.string(),
  version: z.string(),
  minimumVersion: z.string(),
  /** SHA-256 of the manifest's canonical JSON, 64 hex digits: what makes two registrations the same. */
  digest: z.string(),
  artifacts: z.array(
    releaseArtifactSchema
      .extend({
        url: z.string().nullable(),
        /** Whether the deployment holds the build's bytes (releases.upload), so nodes fetch it through their gateway. */
        stored: z.boolean(),
      })
      .describe('A build: platform, size, SHA-256, URL, and whether the deployment stores it'),
  ),
  /** The distinct pinned keys whose signatures verified when it was registered. */
  signers: z.array(z.string()),
  /** The whole signed envelope, for a machine to verify again against its own pins. */
  manifest: releaseManifestSchema,
  signatures: releaseSignaturesSchema,
  registeredAt: isoTime,
  registeredBy: z.string(),
});

const READ = { action: 'compute:releases:read' } as const;

const register = method({
  kind: 'mutation',
  summary:
    'Register a signed bcd release: accepted only when a threshold of the deployment’s pinned release keys signed its manifest',
  access: { action: 'compute:releases:register' },
  tenantScoped: true,
  platformOnly: true,
  input: z
    .object({
      tenantId,
      manifest: releaseManifestSchema.describe(
        'The release manifest: version, artifacts, minimumVersion, notes, createdAt (docs/releases.md)',
      ),
      signatures: releaseSignaturesSchema,
    })
    .strict(),
  output: releaseSchema.extend({
    /** False when the same manifest was registered before: the call changed nothing. */
    created: z.boolean(),
  }),
});

const list = method({
  kind: 'query',
  summary: 'The registered releases, newest first',
  access: READ,
  tenantScoped: true,
  platformOnly: true,
  input: z.object({ tenantId, ...pageInputById('release') }).strict(),
  output: pageOf(releaseSchema),
});

const get = method({
  kind: 'query',
  summary: 'One release by its id or its version, with its signed envelope',
  access: READ,
  tenantScoped: true,
  platformOnly: true,
  resource: (input) => ({ type: 'compute-release', ...(input.releaseId ? { id: input.releaseId } : {}) }),
  input: z
    .object({
      tenantId,
      releaseId: idOf('release').optional().describe('The release, rel_…; or give version'),
      version: releaseVersion.optional().describe('The release’s version, such as 1.4.0; or give releaseId'),
    })
    .strict()
    .refine((input) => (input.releaseId === undefined) !== (input.version === undefined), {
      message: 'give releaseId or version, not both',
    }),
  output: releaseSchema,
});

/** The most bytes one `releases.upload` call carries (its base64 fits the 64 KiB body). */
export const RELEASE_UPLOAD_CHUNK_BYTES = 32_768;

const upload = method({
  kind: 'mutation',
  summary:
    'Store a registered release’s artifact, one piece at a time: kept only once all of it has the size and SHA-256 the signed manifest names',
  access: { action: 'compute:releases:register' },
  tenantScoped: true,
  platformOnly: true,
  input: z
    .object({
      tenantId,
      version: releaseVersion.describe('The registered release, such as 1.4.0'),
      platform: releaseArtifactSchema.shape.platform,
      offset: z
        .number()
        .int()
        .min(0)
        .max(2 ** 40)
        .describe('Where this piece starts in the artifact: the bytes stored so far'),
      data: z
        .string()
        .min(4)
        .max(Math.ceil(RELEASE_UPLOAD_CHUNK_BYTES / 3) * 4)
        .regex(/^[A-Za-z0-9+/]+={0,2}$/, 'must be standard base64')
        .describe('The piece, base64, at most 32 KiB of bytes'),
    })
    .strict(),
  output: z.object({
    version: z.string(),
    platform: z.string(),
    /** Bytes stored so far, and the manifest's size. */
    stored: z.number().int(),
    size: z.number().int(),
    /** True once every byte is stored and the SHA-256 matched the manifest's. */
    complete: z.boolean(),
  }),
});

const rotatePins = method({
  kind: 'mutation',
  summary:
    'Change the release keys by a statement a threshold of the current ones signed (release sign-pins): the deployment verifies with the new keys from then on, and each node follows the statement itself',
  access: { action: 'compute:releases:register' },
  tenantScoped: true,
  platformOnly: true,
  input: z
    .object({
      tenantId,
      statement: releasePinStatementSchema.shape.statement.describe(
        'The new pin set: kind bcd-release-pins, epoch (one past the current), pins, threshold, issuedAt',
      ),
      signatures: releasePinStatementSchema.shape.signatures,
    })
    .strict(),
  output: z.object({
    epoch: z.number().int(),
    pins: z.array(z.string()),
    threshold: z.number().int(),
    /** The keys of the epoch before whose signatures verified. */
    signers: z.array(z.string()),
    registeredAt: isoTime,
    /** False when this statement was accepted before: the call changed nothing. */
    created: z.boolean(),
  }),
});

/** The `releases` group (IAM actions compute:releases:*). */
export const releasesGroup = defineGroup(
  'releases',
  { module: 'rollout' },
  { register, upload, list, get, rotatePins },
);
