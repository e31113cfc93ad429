/**
 * What the release tools share: the key file (`--key`, refused when other users can read it), the
 * manifest or envelope file, and where the signed envelope goes (stdout, or a new `--out` file).
 */
import type { ReleaseEnvelope, ReleaseKey } from '@better-compute/core/release';
import type { ResolvedIO, StringFlag } from '../../define.js';
import { readJsonFile, readPrivateKeyFile, writeJsonOut } from '../files.js';

/** A manifest with 32 artifacts and 32 signatures is some 80 KiB; anything past this is not one. */
const MAX_DOCUMENT_BYTES = 1024 * 1024;

export const keyFlag = {
  type: 'string',
  required: true,
  description: 'Your release key, as "release keygen" wrote it (mode 0600)',
  placeholder: 'PATH',
} as const satisfies StringFlag;

export const outFlag = {
  type: 'string',
  description: 'A new file for the envelope (never written over); stdout without it',
  placeholder: 'FILE',
} as const satisfies StringFlag;

/** Reads `--key PATH`: an Ed25519 release key, readable by its owner only. */
export async function readReleaseKeyFile(io: ResolvedIO, path: string): Promise<ReleaseKey> {
  const { readReleaseKey } = await import('@better-compute/core/release');
  const pem = await readPrivateKeyFile(
    io,
    path,
    'a release key',
    'Make one with "better-compute release keygen --out PATH".',
  );
  return readReleaseKey(pem, path);
}

/** Reads a manifest or an envelope file; a bare manifest comes back with no signatures. */
export async function readReleaseFile(io: ResolvedIO, path: string, what: string): Promise<ReleaseEnvelope> {
  const { readReleaseDocument } = await import('@better-compute/core/release');
  const hint =
    'Give a manifest { version, artifacts, minimumVersion, notes, createdAt } or the envelope "release sign" wrote (docs/releases.md).';
  return readReleaseDocument(await readJsonFile(io, path, what, MAX_DOCUMENT_BYTES, hint), path);
}

/** The envelope itself on stdout, or a summary once it is in a new `--out` file. */
export async function deliverEnvelope(
  io: ResolvedIO,
  envelope: ReleaseEnvelope,
  signer: string,
  out: string | undefined,
): Promise<unknown> {
  if (out === undefined) return envelope;
  const path = await writeJsonOut(io, out, envelope, 'an envelope is never written over');
  return {
    out: path,
    version: envelope.manifest.version,
    keyId: signer,
    signatures: envelope.signatures.map((signature) => signature.keyId),
  };
}
