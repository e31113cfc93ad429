/**
 * Release keys and signatures: Ed25519 keys held offline by people, named by the project's pin form
 * (`sha256/` + base64 of SHA-256 over the SPKI DER, as command roots and audit keys are), signing
 * the manifest's canonical bytes. A release verifies when a threshold of distinct pinned keys signed
 * it; signatures by keys nobody pinned are ignored, and a key counts once however often it appears
 * (TUF's rule: a threshold is of keys, not of signatures). Node only (node:crypto).
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  sign,
  verify,
} from 'node:crypto';
import { publicKeyPin } from '../command-root.js';
import { ComputeError } from '../errors.js';
import { spkiDerOfPem, strictSpkiKey } from '../spki.js';
import { canonicalBytes } from './canonical.js';
import {
  RELEASE_KEY_ID,
  type ReleaseEnvelope,
  type ReleaseManifest,
  type ReleaseSignature,
  releaseEnvelopeSchema,
  releaseSigningBytes,
  readReleaseDocument,
} from './manifest.js';

/** An Ed25519 SPKI is 44 bytes; allow a little before refusing. */
const MAX_SPKI_BYTES = 128;
const SIGNATURE_BYTES = 64;

const isEd25519 = (key: KeyObject) => key.asymmetricKeyType === 'ed25519';

/** A release key's id: `sha256/` and the base64 of SHA-256 over its SPKI DER. */
export const releaseKeyId = (key: KeyObject): string => publicKeyPin(key);

/** Base64 of a public key's SPKI DER: how envelopes carry the signing key. */
export function encodeReleasePublicKey(key: KeyObject): string {
  const publicKey = key.type === 'public' ? key : createPublicKey(key);
  return publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
}

/** Standard padded base64 that re-encodes to itself (one spelling per value), else null. */
function fromBase64(text: string, maxBytes: number): Buffer | null {
  if (text.length > Math.ceil(maxBytes / 3) * 4 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return null;
  const bytes = Buffer.from(text, 'base64');
  return bytes.toString('base64') === text ? bytes : null;
}

/** An Ed25519 public key from base64 SPKI DER or an SPKI PEM (a `PATH.pub` file), else null. */
export function decodeReleasePublicKey(text: unknown): KeyObject | null {
  if (typeof text !== 'string') return null;
  const der = spkiDerOfPem(text) ?? fromBase64(text.trim(), MAX_SPKI_BYTES);
  return der ? strictSpkiKey(der, MAX_SPKI_BYTES, isEd25519) : null;
}

export interface ReleaseKeyFiles {
  keyId: string;
  /** PKCS#8 PEM. */
  privatePem: string;
  /** SPKI PEM, for `PATH.pub`. */
  publicPem: string;
}

/** A new Ed25519 release key as its two files. */
export function generateReleaseKey(): ReleaseKeyFiles {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return {
    keyId: releaseKeyId(publicKey),
    privatePem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    publicPem: publicKey.export({ type: 'spki', format: 'pem' }) as string,
  };
}

export interface ReleaseKey {
  privateKey: KeyObject;
  publicKey: KeyObject;
  keyId: string;
}

/** A release key from its PEM; anything but an Ed25519 private key is INVALID_ARGUMENT. */
export function readReleaseKey(pem: string, name: string): ReleaseKey {
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey({ key: pem, format: 'pem' });
  } catch {
    throw new ComputeError('INVALID_ARGUMENT', `${name} is not a release key`, {
      hint: 'Give the file "better-compute release keygen" wrote (not its .pub).',
      details: { field: 'key' },
    });
  }
  if (!isEd25519(privateKey))
    throw new ComputeError('INVALID_ARGUMENT', `${name} is not an Ed25519 key`, {
      hint: 'Release keys are Ed25519: make one with "better-compute release keygen".',
      details: { field: 'key' },
    });
  const publicKey = createPublicKey(privateKey);
  return { privateKey, publicKey, keyId: releaseKeyId(publicKey) };
}

/** The SHA-256 of the manifest's canonical JSON, 64 hex digits: the release's content digest. */
export function releaseDigest(manifest: ReleaseManifest): string {
  return createHash('sha256').update(canonicalBytes(manifest)).digest('hex');
}

/** Signs a manifest (parsed by releaseManifestSchema) with a release key. */
export function signManifest(manifest: ReleaseManifest, key: ReleaseKey): ReleaseSignature {
  return {
    keyId: key.keyId,
    publicKey: encodeReleasePublicKey(key.publicKey),
    sig: sign(null, releaseSigningBytes(manifest), key.privateKey).toString('base64'),
  };
}

/** Whether `signature` is a valid Ed25519 signature of the manifest by `key`. Never throws. */
function signatureHolds(manifest: ReleaseManifest, signature: ReleaseSignature, key: KeyObject): boolean {
  const sig = fromBase64(signature.sig, SIGNATURE_BYTES);
  if (!sig || sig.length !== SIGNATURE_BYTES) return false;
  try {
    return verify(null, releaseSigningBytes(manifest), key, sig);
  } catch {
    return false;
  }
}

/** Why a signature is not what it claims, or null when its key is its key id's and it verifies. */
function signatureProblem(manifest: ReleaseManifest, signature: ReleaseSignature): string | null {
  const key = decodeReleasePublicKey(signature.publicKey);
  if (!key) return 'its publicKey is not an Ed25519 key';
  if (releaseKeyId(key) !== signature.keyId) return 'its publicKey is not the key its keyId names';
  return signatureHolds(manifest, signature, key) ? null : 'it does not verify over this manifest';
}

function unverified(message: string, details: Record<string, unknown>, hint: string): ComputeError {
  return new ComputeError('RELEASE_UNVERIFIED', message, { details, hint });
}

/**
 * Checks that every signature an envelope already carries is what it claims (its key is its key
 * id's, and it verifies over this manifest): a manifest edited after it was signed is refused
 * before anyone adds a signature to it.
 */
export function checkEnvelopeSignatures(envelope: ReleaseEnvelope): void {
  envelope.signatures.forEach((signature, index) => {
    const problem = signatureProblem(envelope.manifest, signature);
    if (problem)
      throw unverified(
        `signature ${index + 1} (${signature.keyId}) is not valid: ${problem}`,
        { index, keyId: signature.keyId, version: envelope.manifest.version },
        'The manifest or the signature was changed after signing: sign the original manifest again.',
      );
  });
}

/**
 * Adds a release key's signature to a manifest or an envelope, after checking the signatures it
 * already carries. A key that already signed it is ALREADY_EXISTS: a second signature by one key
 * would count for nothing.
 */
export function addReleaseSignature(document: ReleaseEnvelope, key: ReleaseKey): ReleaseEnvelope {
  checkEnvelopeSignatures(document);
  if (document.signatures.some((signature) => signature.keyId === key.keyId))
    throw new ComputeError(
      'ALREADY_EXISTS',
      `${key.keyId} has already signed release ${document.manifest.version}`,
      {
        details: { keyId: key.keyId, version: document.manifest.version },
        hint: 'A threshold counts distinct keys: have another release key cosign it.',
      },
    );
  return {
    manifest: document.manifest,
    signatures: [...document.signatures, signManifest(document.manifest, key)],
  };
}

/** A pinned release key: its id, and its public key when the pin gave one. */
export interface ReleasePin {
  keyId: string;
  publicKey?: KeyObject;
}

/** What a pin may be written as: a key id, a public key (base64 SPKI DER or PEM), or both. */
export type ReleasePinInput = string | { keyId: string; publicKey: string };

/** Reads one pin; null when it is neither a key id nor an Ed25519 public key (or they disagree). */
export function readReleasePin(pin: unknown): ReleasePin | null {
  if (typeof pin === 'string') {
    if (RELEASE_KEY_ID.test(pin)) return { keyId: pin };
    const key = decodeReleasePublicKey(pin);
    return key ? { keyId: releaseKeyId(key), publicKey: key } : null;
  }
  if (typeof pin !== 'object' || pin === null) return null;
  const { keyId, publicKey } = pin as { keyId?: unknown; publicKey?: unknown };
  const key = decodeReleasePublicKey(publicKey);
  return key && releaseKeyId(key) === keyId ? { keyId: keyId as string, publicKey: key } : null;
}

export interface ReleaseTrust {
  pins: ReleasePin[];
  threshold: number;
}

/**
 * Pins and a threshold, checked: at least one pin, each a key id or an Ed25519 public key, no key
 * twice, and a threshold from 1 to the number of pins (default: every pin). `code` is what a
 * mistake is answered with (INVALID_ARGUMENT on a command line, INVALID_CONFIG in a configuration).
 */
export function readReleaseTrust(
  pins: readonly unknown[],
  threshold: number | undefined,
  code: 'INVALID_ARGUMENT' | 'INVALID_CONFIG' = 'INVALID_ARGUMENT',
  where = 'pins',
): ReleaseTrust {
  const refuse = (message: string, field: string): never => {
    throw new ComputeError(code, message, {
      details: { field },
      hint: 'A pin is a release key id (sha256/…, as release keygen prints it) or the key’s public half; the threshold is how many pinned keys must sign, from 1 to the number of pins.',
    });
  };
  if (!Array.isArray(pins) || pins.length === 0) refuse(`${where}: name at least one release key`, where);
  if (pins.length > 64) refuse(`${where}: at most 64 release keys`, where);
  const read: ReleasePin[] = [];
  pins.forEach((pin, i) => {
    const parsed = readReleasePin(pin);
    if (!parsed)
      refuse(
        `${where}[${i}] is neither a release key id (sha256/…) nor an Ed25519 public key`,
        `${where}.${i}`,
      );
    if (read.some((other) => other.keyId === parsed!.keyId))
      refuse(`${where}[${i}] pins ${parsed!.keyId} a second time`, `${where}.${i}`);
    read.push(parsed!);
  });
  const wanted = threshold ?? read.length;
  if (!Number.isSafeInteger(wanted) || wanted < 1 || wanted > read.length)
    refuse(
      `threshold must be a whole number from 1 to ${read.length}, the number of pins (got ${String(threshold)})`,
      'threshold',
    );
  return { pins: read, threshold: wanted };
}

/** A release whose signatures met the threshold. */
export interface VerifiedRelease {
  manifest: ReleaseManifest;
  /** releaseDigest(manifest). */
  digest: string;
  /** The distinct pinned keys whose signatures verified, in envelope order. */
  signers: string[];
  threshold: number;
}

/**
 * Verifies an envelope against pinned release keys: counts the distinct pinned keys whose
 * signatures verify over the manifest; keys nobody pinned are ignored. Fewer than the threshold is
 * RELEASE_UNVERIFIED, with what was found in its details; a malformed envelope is INVALID_ARGUMENT.
 *
 * @example
 * const release = verifyRelease(JSON.parse(text), { pins: ['sha256/…', 'sha256/…'], threshold: 2 });
 */
export function verifyRelease(
  envelope: unknown,
  options: { pins: readonly ReleasePinInput[] | ReleaseTrust; threshold?: number },
): VerifiedRelease {
  const trust = Array.isArray(options.pins)
    ? readReleaseTrust(options.pins, options.threshold)
    : (options.pins as ReleaseTrust);
  const parsed = releaseEnvelopeSchema.safeParse(envelope);
  const { manifest, signatures } = parsed.success
    ? (parsed.data as ReleaseEnvelope)
    : readReleaseDocument(envelope, 'the envelope');
  if (signatures.length === 0)
    throw unverified(
      `release ${manifest.version} carries no signature`,
      { version: manifest.version, signers: [], threshold: trust.threshold },
      'Sign it first: better-compute release sign --key KEY manifest.json --out envelope.json',
    );
  const pinned = new Map(trust.pins.map((pin) => [pin.keyId, pin]));
  const signers: string[] = [];
  const unpinned: string[] = [];
  const invalid: string[] = [];
  for (const signature of signatures) {
    const pin = pinned.get(signature.keyId);
    if (!pin) {
      unpinned.push(signature.keyId);
      continue;
    }
    if (signers.includes(signature.keyId)) continue;
    // A pin that names the key verifies under it; a key-id pin under the key the envelope carries,
    // once that key is shown to be the one the id names.
    const holds = pin.publicKey
      ? signatureHolds(manifest, signature, pin.publicKey)
      : signatureProblem(manifest, signature) === null;
    if (holds) signers.push(signature.keyId);
    else invalid.push(signature.keyId);
  }
  if (signers.length < trust.threshold)
    throw unverified(
      `release ${manifest.version} has ${signers.length} valid signature${signers.length === 1 ? '' : 's'} by pinned keys; ${trust.threshold} are needed` +
        (invalid.length
          ? ` (${invalid.length} pinned key${invalid.length === 1 ? '' : 's'} signed something else: the manifest was changed after signing)`
          : '') +
        (unpinned.length ? ` (${unpinned.length} by keys not pinned, which do not count)` : ''),
      { version: manifest.version, signers, threshold: trust.threshold, invalid, unpinned },
      invalid.length
        ? 'Do not install it: it is not what the release keys signed. Sign the original manifest again.'
        : 'Have more pinned release keys sign it (better-compute release cosign --key KEY envelope.json).',
    );
  return { manifest, digest: releaseDigest(manifest), signers, threshold: trust.threshold };
}
