/**
 * The release manifest and its signed envelope, as zod schemas shared by the CLI, the server's
 * method table and the daemon. Strict: a field the schema does not name is refused, so nothing
 * unsigned or unread can ride along in what keys sign. Pure: zod only (the method table loads it).
 * docs/releases.md describes the format.
 */
import { z } from 'zod';
import { ComputeError } from '../errors.js';
import { canonicalBytes } from './canonical.js';
import { isSemver, MAX_VERSION_LENGTH } from './semver.js';

/** The most artifacts (platforms) one release carries, and signatures one envelope carries. */
export const MAX_ARTIFACTS = 32;
export const MAX_SIGNATURES = 32;
/** The longest release notes, in UTF-16 code units. */
export const MAX_NOTES = 8_000;
/** The largest artifact a manifest may name: 1 TiB, far above any bcd build. */
export const MAX_ARTIFACT_BYTES = 2 ** 40;

/** A release key's id: `sha256/` and the standard base64 of SHA-256 over its SPKI DER (the project's pin form). */
export const RELEASE_KEY_ID = /^sha256\/[A-Za-z0-9+/]{43}=$/;

/** No lone surrogate (it has no UTF-8 spelling) and no control character but line breaks and tabs. */
function isPlainText(value: string): boolean {
  if (/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029]/.test(value)) return false;
  return !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(value);
}

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const isInstant = (text: string) => {
  if (!ISO_INSTANT.test(text)) return false;
  const ms = Date.parse(text);
  return Number.isFinite(ms) && new Date(ms).toISOString() === text;
};

/** An artifact's URL: http or https, no credentials in it. */
function isArtifactUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return (url.protocol === 'https:' || url.protocol === 'http:') && !url.username && !url.password;
  } catch {
    return false;
  }
}

export const releaseVersion = z
  .string()
  .max(MAX_VERSION_LENGTH)
  .refine(isSemver, { message: 'must be a semantic version such as 1.4.0 or 2.0.0-rc.1 (no +build)' });

export const releaseArtifactSchema = z
  .object({
    platform: z
      .string()
      .regex(/^[a-z0-9]+(-[a-z0-9_]+)+$/, 'must be an OS and architecture such as linux-x64')
      .max(32)
      .describe('The OS and architecture it runs on, such as linux-x64 or linux-arm64'),
    size: z.number().int().min(1).max(MAX_ARTIFACT_BYTES).describe('Its length in bytes'),
    sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex digits')
      .describe('The SHA-256 of its bytes, 64 lowercase hex digits'),
    url: z
      .string()
      .max(2048)
      .refine(isArtifactUrl, { message: 'must be an http or https URL without credentials' })
      .optional()
      .describe('Where the artifact can be fetched; the digest, not the URL, is what is trusted'),
  })
  .strict();

export const releaseManifestSchema = z
  .object({
    version: releaseVersion.describe('The version this release installs, a semantic version such as 1.4.0'),
    artifacts: z
      .array(releaseArtifactSchema)
      .min(1)
      .max(MAX_ARTIFACTS)
      .refine((artifacts) => new Set(artifacts.map((a) => a.platform)).size === artifacts.length, {
        message: 'names a platform twice',
      })
      .describe('One build per platform: its size and SHA-256'),
    minimumVersion: releaseVersion.describe('The lowest version this release may replace'),
    notes: z
      .string()
      .max(MAX_NOTES)
      .refine(isPlainText, {
        message: 'must be text without control characters (line breaks and tabs are fine)',
      })
      .describe('What changed, for the operators who roll it out'),
    createdAt: z
      .string()
      .refine(isInstant, { message: 'must be an instant such as 2026-05-01T12:00:00.000Z' })
      .describe('When the release was made, as toISOString writes it'),
  })
  .strict();

export const releaseSignatureSchema = z
  .object({
    keyId: z
      .string()
      .regex(RELEASE_KEY_ID, 'must be a key id: sha256/ and 44 characters of base64')
      .describe('The signing key’s id (release keygen prints it)'),
    publicKey: z
      .string()
      .regex(/^[A-Za-z0-9+/]{1,200}={0,2}$/, 'must be base64')
      .describe('The signing key: base64 of its SPKI DER, whose SHA-256 is the key id'),
    sig: z
      .string()
      .regex(/^[A-Za-z0-9+/]{86}==$/, 'must be a base64 Ed25519 signature (64 bytes)')
      .describe('The Ed25519 signature of the manifest’s canonical bytes, base64'),
  })
  .strict();

export const releaseSignaturesSchema = z
  .array(releaseSignatureSchema)
  .max(MAX_SIGNATURES)
  .describe('The release keys’ signatures over the manifest; a threshold of pinned keys must be among them');

export const releaseEnvelopeSchema = z
  .object({ manifest: releaseManifestSchema, signatures: releaseSignaturesSchema })
  .strict();

export type ReleaseArtifact = z.output<typeof releaseArtifactSchema>;
export type ReleaseManifest = z.output<typeof releaseManifestSchema>;
export type ReleaseSignature = z.output<typeof releaseSignatureSchema>;
export type ReleaseEnvelope = z.output<typeof releaseEnvelopeSchema>;

/**
 * What a signature covers: this context line, then the manifest's canonical JSON. The line keeps a
 * release signature from ever being read as the key's signature over anything else.
 */
export const RELEASE_SIGNING_CONTEXT = 'better-compute release manifest v1\n';

/** The bytes a release key signs for `manifest` (already parsed by releaseManifestSchema). */
export function releaseSigningBytes(manifest: ReleaseManifest): Uint8Array {
  const context = new TextEncoder().encode(RELEASE_SIGNING_CONTEXT);
  const body = canonicalBytes(manifest);
  const out = new Uint8Array(context.length + body.length);
  out.set(context);
  out.set(body, context.length);
  return out;
}

/** The first problem zod found, as `field: message`. */
function firstIssue(error: z.ZodError, where: string): { field: string; message: string } {
  // An unknown field first: it is the mistake this strict format exists to catch.
  const issue = error.issues.find((candidate) => candidate.code === 'unrecognized_keys') ?? error.issues[0];
  const path = issue?.path.map(String).join('.') ?? '';
  const field = path ? `${where}.${path}` : where;
  if (issue?.code === 'unrecognized_keys')
    return { field, message: `has a field the format does not know: ${issue.keys.join(', ')}` };
  if (issue?.code === 'invalid_type' && / received undefined$/.test(issue.message))
    return { field, message: 'is missing' };
  return { field, message: issue?.message ?? 'is not valid' };
}

/**
 * A manifest or an envelope read from a file: a bare manifest comes back with no signatures. Throws
 * INVALID_ARGUMENT naming the first field that is wrong (an unknown field included).
 */
export function readReleaseDocument(value: unknown, name = 'the document'): ReleaseEnvelope {
  const isEnvelope =
    typeof value === 'object' && value !== null && !Array.isArray(value) && 'manifest' in value;
  const parsed = isEnvelope ? releaseEnvelopeSchema.safeParse(value) : releaseManifestSchema.safeParse(value);
  if (!parsed.success) {
    const { field, message } = firstIssue(parsed.error, isEnvelope ? 'envelope' : 'manifest');
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `${name} is not a release ${isEnvelope ? 'envelope' : 'manifest'}: ${field} ${message}`,
      {
        details: { field },
        hint: 'A manifest is { version, artifacts, minimumVersion, notes, createdAt }; an envelope is { manifest, signatures } (docs/releases.md).',
      },
    );
  }
  return isEnvelope
    ? (parsed.data as ReleaseEnvelope)
    : { manifest: parsed.data as ReleaseManifest, signatures: [] };
}

/**
 * What a release-pin statement's signatures cover: this context line, then the body's canonical
 * JSON; distinct from the manifest's, so neither signature can stand for the other.
 */
export const RELEASE_PIN_SIGNING_CONTEXT = 'better-compute release pins v1\n';

/** A new release-pin set, signed by a threshold of the current release keys (pin-statement.ts). */
export const releasePinStatementSchema = z
  .object({
    statement: z
      .object({
        kind: z.literal('bcd-release-pins').describe('What this is: always bcd-release-pins'),
        epoch: z
          .number()
          .int()
          .min(1)
          .max(1_000_000)
          .describe('Past the epoch the nodes hold (0 is the set pinned at join)'),
        pins: z
          .array(z.string().regex(RELEASE_KEY_ID, 'must be a key id: sha256/ and 44 characters of base64'))
          .min(1)
          .max(64)
          .describe('The new release key ids'),
        threshold: z.number().int().min(1).max(64).describe('How many of the new keys must sign a release'),
        issuedAt: z
          .string()
          .regex(ISO_INSTANT, 'must be an instant like 2026-01-01T00:00:00.000Z')
          .describe('When it was signed'),
      })
      .strict()
      .refine((body) => body.threshold <= body.pins.length, {
        message: 'threshold is more than the number of pins',
        path: ['threshold'],
      })
      .refine((body) => new Set(body.pins).size === body.pins.length, {
        message: 'a key is pinned twice',
        path: ['pins'],
      }),
    signatures: releaseSignaturesSchema.min(1),
  })
  .strict();

export type ReleasePinStatement = z.output<typeof releasePinStatementSchema>;
export type ReleasePinStatementBody = ReleasePinStatement['statement'];
