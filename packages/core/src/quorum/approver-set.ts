/**
 * The approver set: which P-256 keys may approve batches of a trust domain, and how many must. A
 * daemon pins one set and follows changes only through statements at the next epoch signed by a
 * threshold of the set it already trusts, so whoever controls the server cannot swap the approvers.
 */
import { createHash, type KeyObject } from 'node:crypto';
import { ComputeError } from '../errors.js';
import { ByteWriter, fromBase64url, toBase64url } from './bytes.js';
import { decodePublicKey, encodePublicKey, keyId, SIGNATURE_BYTES, signP256, verifyP256 } from './keys.js';
import { isTrustDomain } from './scope.js';

/** More approvers than anyone reviews by hand; it bounds the work of a check. */
export const MAX_APPROVERS = 64;

export interface Approver {
  kid: string;
  /** Unpadded base64url of the key's SPKI DER. */
  publicKey: string;
}

export interface ApproverSet {
  trustDomain: string;
  /** 1 for the first set; each change is exactly one more. */
  epoch: number;
  /** How many distinct approvers must sign. */
  threshold: number;
  approvers: Approver[];
}

const keyCache = new WeakMap<ApproverSet, Map<string, KeyObject>>();

/** The set's keys by kid (parsed once per set object). The set must have been read by readApproverSet. */
export function approverKeys(set: ApproverSet): Map<string, KeyObject> {
  let keys = keyCache.get(set);
  if (!keys) {
    keys = new Map();
    for (const approver of set.approvers) {
      const key = decodePublicKey(approver.publicKey);
      if (key && keyId(key) === approver.kid) keys.set(approver.kid, key);
    }
    keyCache.set(set, keys);
  }
  return keys;
}

/**
 * Checks an approver set from outside (a file, the database, a pinned copy): a trust domain, a
 * whole epoch, 1 ≤ threshold ≤ approvers ≤ 64, P-256 keys (base64url SPKI DER or PEM), kids that
 * match their keys (given or left out) and no key twice. Answers the set with kids filled in and
 * keys as base64url; INVALID_ARGUMENT otherwise.
 */
export function readApproverSet(value: unknown, where = 'the approver set'): ApproverSet {
  const invalid = (message: string) =>
    new ComputeError('INVALID_ARGUMENT', `${where}: ${message}`, {
      hint: 'An approver set is { trustDomain, epoch, threshold, approvers: [{ publicKey }] } with the keys of "batch keygen" (PATH.pub).',
    });
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid('not a JSON object');
  const { trustDomain, epoch, threshold, approvers } = value as Record<string, unknown>;
  if (!isTrustDomain(trustDomain)) throw invalid('"trustDomain" is not a DNS-style name');
  if (!Number.isSafeInteger(epoch) || (epoch as number) < 1)
    throw invalid('"epoch" is not a whole number of 1 or more');
  if (!Array.isArray(approvers) || approvers.length === 0 || approvers.length > MAX_APPROVERS)
    throw invalid(`"approvers" is not a list of 1 to ${MAX_APPROVERS} keys`);
  if (
    !Number.isSafeInteger(threshold) ||
    (threshold as number) < 1 ||
    (threshold as number) > approvers.length
  )
    throw invalid(`"threshold" is not a whole number from 1 to ${approvers.length}, the number of approvers`);
  const seen = new Set<string>();
  const read = approvers.map((approver: unknown, index) => {
    const entry = (typeof approver === 'object' && approver !== null ? approver : {}) as Record<
      string,
      unknown
    >;
    const key = decodePublicKey(entry.publicKey);
    if (!key) throw invalid(`approver ${index} has no P-256 public key`);
    const kid = keyId(key);
    if (entry.kid !== undefined && entry.kid !== kid)
      throw invalid(`approver ${index}'s kid is not its key's (${kid})`);
    if (seen.has(kid)) throw invalid(`the key ${kid} is listed twice`);
    seen.add(kid);
    return { kid, publicKey: encodePublicKey(key) };
  });
  read.sort((a, b) => (a.kid < b.kid ? -1 : a.kid > b.kid ? 1 : 0));
  return { trustDomain, epoch: epoch as number, threshold: threshold as number, approvers: read };
}

const SET_CONTEXT = 'better-compute/approver-set/v1';

/** The bytes a current approver signs to move to `next`: the whole set, approvers in kid order. */
export function approverSetMessage(next: ApproverSet): Uint8Array {
  const sorted = [...next.approvers].sort((a, b) => (a.kid < b.kid ? -1 : a.kid > b.kid ? 1 : 0));
  const out = new ByteWriter()
    .text(SET_CONTEXT)
    .text(next.trustDomain)
    .u64(next.epoch)
    .u32(next.threshold)
    .u32(sorted.length);
  for (const approver of sorted)
    out.text(approver.kid).bytes(fromBase64url(approver.publicKey, 200) ?? new Uint8Array());
  return out.finish();
}

/** One current approver's signature over a new set. */
export interface ApproverSetSignature {
  kid: string;
  signature: string;
}

export function signApproverSet(privateKey: KeyObject, kid: string, next: ApproverSet): ApproverSetSignature {
  return { kid, signature: toBase64url(signP256(privateKey, approverSetMessage(next))) };
}

export type SetChangeVerdict =
  { ok: true; signedBy: string[] } | { ok: false; reason: string; signedBy: string[] };

/**
 * Whether `next` may replace `current`: the same trust domain, epoch exactly current + 1, and
 * signatures over `next` by at least `current.threshold` distinct keys of the CURRENT set (the new
 * set's own keys count for nothing until it is trusted). Never throws.
 */
export function verifyApproverSetChange(
  current: ApproverSet,
  next: ApproverSet,
  signatures: readonly ApproverSetSignature[],
): SetChangeVerdict {
  const signedBy: string[] = [];
  if (next.trustDomain !== current.trustDomain)
    return {
      ok: false,
      reason: `the new set is for trust domain ${next.trustDomain}, not ${current.trustDomain}`,
      signedBy,
    };
  if (next.epoch !== current.epoch + 1)
    return {
      ok: false,
      reason: `the new set's epoch is ${next.epoch}; only ${current.epoch + 1} follows ${current.epoch}`,
      signedBy,
    };
  const keys = approverKeys(current);
  const message = approverSetMessage(next);
  for (const { kid, signature } of signatures) {
    const key = typeof kid === 'string' ? keys.get(kid) : undefined;
    const bytes = fromBase64url(signature, SIGNATURE_BYTES);
    if (key && bytes && !signedBy.includes(kid) && verifyP256(key, message, bytes)) signedBy.push(kid);
  }
  return signedBy.length >= current.threshold
    ? { ok: true, signedBy }
    : {
        ok: false,
        reason: `${signedBy.length} of the current set's approvers signed the new set; ${current.threshold} must`,
        signedBy,
      };
}

/** The format tag of what `batch sign-approvers` writes: the new set and one current approver's signature. */
export const APPROVER_SET_SIGNATURE_FORMAT = 'better-compute.approver-set-signature/v1';

export interface ApproverSetSignatureFile extends ApproverSetSignature {
  format: typeof APPROVER_SET_SIGNATURE_FORMAT;
  set: ApproverSet;
}

/**
 * The published history of a deployment's approver sets, oldest first: the first set (epoch 1,
 * trusted as the operator installed it) and each change with the current set's signatures over it.
 * The PKI bundle keeps it (`pki approvers`); the gateway sends it to daemons in `welcome` as
 * `approverSets`, and a daemon follows it from the set it pinned.
 */
export interface ApproverChainEntry {
  set: ApproverSet;
  /** Signatures by the previous set's approvers; empty for the first set. */
  signatures: ApproverSetSignature[];
}

export type ChainVerdict = { ok: true; set: ApproverSet } | { ok: false; reason: string };

/** The most entries a chain may hold: one change a day for years. */
export const MAX_APPROVER_CHAIN = 4096;

/**
 * Follows a chain from `pinned` (the set a daemon trusts) to the newest set whose every step is
 * signed by a threshold of the set before it. With nothing pinned, the chain's first set is taken
 * as it is (trust on first use, as a command root is pinned at join); a chain that does not
 * contain the pinned set, or any step that does not verify, is refused. Never throws.
 */
export function followApproverChain(pinned: ApproverSet | null, chain: unknown): ChainVerdict {
  if (!Array.isArray(chain) || chain.length === 0 || chain.length > MAX_APPROVER_CHAIN)
    return { ok: false, reason: 'the approver chain is not a list of 1 to 4096 sets' };
  const entries: ApproverChainEntry[] = [];
  try {
    for (const [index, entry] of chain.entries()) {
      const value = entry as Record<string, unknown> | null;
      const signatures = Array.isArray(value?.signatures)
        ? (value.signatures as ApproverSetSignature[]).slice(0, MAX_APPROVERS)
        : [];
      entries.push({
        set: readApproverSet(value?.set, `approver set ${index + 1} of the chain`),
        signatures,
      });
    }
  } catch (error) {
    return { ok: false, reason: (error as Error).message };
  }
  if (entries[0]!.set.epoch !== 1)
    return { ok: false, reason: 'the approver chain does not start at epoch 1' };
  for (let i = 1; i < entries.length; i++) {
    const verdict = verifyApproverSetChange(entries[i - 1]!.set, entries[i]!.set, entries[i]!.signatures);
    if (!verdict.ok) return { ok: false, reason: `epoch ${entries[i]!.set.epoch}: ${verdict.reason}` };
  }
  if (pinned) {
    const at = entries.find((entry) => entry.set.epoch === pinned.epoch);
    if (!at || approverSetDigest(at.set) !== approverSetDigest(pinned))
      return {
        ok: false,
        reason: `the approver chain does not hold the pinned set of epoch ${pinned.epoch}`,
      };
  }
  return { ok: true, set: entries.at(-1)!.set };
}

/** A set's identity: the hex SHA-256 of its signed message (what a change signs). */
export function approverSetDigest(set: ApproverSet): string {
  return createHash('sha256').update(approverSetMessage(set)).digest('hex');
}
