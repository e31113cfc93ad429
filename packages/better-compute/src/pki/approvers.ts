/**
 * The destructive-batch quorum's approver sets in the PKI bundle (`pki approvers`): the first set
 * (epoch 1), installed by the operator from approvers' public keys, and each later set, appended
 * only with a threshold of the CURRENT set's signatures (`batch sign-approvers`), so the chain the
 * server publishes is the one every daemon can follow from the set it pinned. Public keys only:
 * nothing here opens a sealed key, so no secret is needed (docs/decisions/quorum-approver-chain.md).
 */
import { ComputeError } from '@better-compute/core';
import {
  APPROVER_SET_SIGNATURE_FORMAT,
  type ApproverChainEntry,
  type ApproverSet,
  type ApproverSetSignature,
  approverSetDigest,
  decodePublicKey,
  encodePublicKey,
  keyId,
  MAX_APPROVERS,
  readApproverSet,
  verifyApproverSetChange,
} from '@better-compute/core/quorum';
import { type PkiBundle, readPkiBundle } from './bundle.js';
import { replaceBundle } from './rotation.js';

/** A file given on the command line: what it was called, and what it held. */
export interface NamedFile<T> {
  name: string;
  value: T;
}

const changeHint = (nextEpoch: number) =>
  `Change it with a threshold of the current approvers' signatures: each runs "better-compute batch sign-approvers --key … --epoch ${nextEpoch} --approvers NEXT.json --out SIG.json", then "better-compute pki approvers --set NEXT.json --signature SIG1.json --signature SIG2.json …".`;

function invalidArgument(message: string, field: string, hint?: string): ComputeError {
  return new ComputeError('INVALID_ARGUMENT', message, { hint, details: { field } });
}

/** What differs between a signed set and the intended one, for a message. */
function setDifferences(signed: ApproverSet, intended: ApproverSet): string {
  const kids = (set: ApproverSet) => set.approvers.map((approver) => approver.kid).join(', ');
  return [
    signed.trustDomain !== intended.trustDomain &&
      `trust domain ${signed.trustDomain}, not ${intended.trustDomain}`,
    signed.epoch !== intended.epoch && `epoch ${signed.epoch}, not ${intended.epoch}`,
    signed.threshold !== intended.threshold && `threshold ${signed.threshold}, not ${intended.threshold}`,
    kids(signed) !== kids(intended) && `approvers ${kids(signed)}, not ${kids(intended)}`,
  ]
    .filter(Boolean)
    .join('; ');
}

/** The current (newest) set of a bundle's chain, or null when the quorum is off. */
function currentApproverSet(bundle: PkiBundle): ApproverSet | null {
  return bundle.approvers.at(-1)?.set ?? null;
}

/**
 * Turns the quorum on: epoch 1 of the bundle's trust domain from `batch keygen`'s `.pub` files,
 * `threshold` of them needed. INVALID_STATE when the bundle already has a set (a change needs the
 * current approvers' signatures), INVALID_ARGUMENT for a file that is not a P-256 public key, a
 * key given twice, or a threshold outside 1 to the number of keys.
 */
export async function installApproverSet(
  path: string,
  publicKeys: readonly NamedFile<string>[],
  threshold: number,
  options: { now?: Date } = {},
): Promise<{ bundle: PkiBundle; entry: ApproverChainEntry }> {
  const bundle = await readPkiBundle(path);
  const current = currentApproverSet(bundle);
  if (current) {
    throw new ComputeError(
      'INVALID_STATE',
      `the PKI bundle ${bundle.path} already has an approver set (epoch ${current.epoch}, ${current.threshold} of ${current.approvers.length}); nothing was changed`,
      { hint: changeHint(current.epoch + 1), details: { epoch: current.epoch } },
    );
  }
  if (publicKeys.length === 0 || publicKeys.length > MAX_APPROVERS)
    throw invalidArgument(
      `give 1 to ${MAX_APPROVERS} approver keys (--pub), not ${publicKeys.length}`,
      'pub',
    );
  const seen = new Map<string, string>();
  const approvers = publicKeys.map(({ name, value }) => {
    const key = decodePublicKey(value);
    if (!key)
      throw invalidArgument(
        `${name} (--pub) is not a P-256 public key`,
        'pub',
        'Give the PATH.pub file "better-compute batch keygen --out PATH" wrote.',
      );
    const kid = keyId(key);
    const first = seen.get(kid);
    if (first !== undefined)
      throw invalidArgument(
        `${first} and ${name} hold the same key (${kid}); each approver is listed once`,
        'pub',
      );
    seen.set(kid, name);
    return { kid, publicKey: encodePublicKey(key) };
  });
  if (!Number.isSafeInteger(threshold) || threshold < 1 || threshold > approvers.length)
    throw invalidArgument(
      `--threshold ${threshold} is not a number from 1 to ${approvers.length}, the number of approver keys`,
      'threshold',
    );
  const set = readApproverSet(
    { trustDomain: bundle.trustDomain, epoch: 1, threshold, approvers },
    'the first approver set',
  );
  const entry: ApproverChainEntry = { set, signatures: [] };
  const now = options.now ?? new Date();
  return { bundle: await replaceBundle(bundle, { ...bundle.document, approvers: [entry] }, now), entry };
}

/**
 * Changes the approver set: `next` is the new set's file as `batch sign-approvers --approvers`
 * reads it (`{ trustDomain, threshold?, epoch?, approvers }`; an epoch or threshold it leaves out
 * comes from `--threshold` or the signatures), and `signatures` the files that command wrote, each
 * over exactly that set (INVALID_ARGUMENT naming what differs otherwise). Appended only when a
 * threshold of the CURRENT set signed it (`verifyApproverSetChange`); otherwise INVALID_STATE with
 * why, and nothing is written.
 */
export async function changeApproverSet(
  path: string,
  next: NamedFile<unknown>,
  signatures: readonly NamedFile<unknown>[],
  options: { threshold?: number | undefined; now?: Date } = {},
): Promise<{ bundle: PkiBundle; entry: ApproverChainEntry }> {
  const bundle = await readPkiBundle(path);
  const current = currentApproverSet(bundle);
  if (!current) {
    throw new ComputeError('INVALID_STATE', `the PKI bundle ${bundle.path} has no approver set to change`, {
      hint: 'Install the first one: "better-compute pki approvers --pub A.pub --pub B.pub --pub C.pub --threshold 2".',
    });
  }
  const file = next.value;
  if (typeof file !== 'object' || file === null || Array.isArray(file))
    throw invalidArgument(
      `${next.name} (--set) is not a JSON object`,
      'set',
      'An approver set file is { "trustDomain", "threshold", "approvers": [{ "publicKey": … }] }, as "better-compute batch sign-approvers --approvers" reads it.',
    );
  const given = file as Record<string, unknown>;
  if (signatures.length === 0 || signatures.length > MAX_APPROVERS)
    throw invalidArgument(
      `give 1 to ${MAX_APPROVERS} signature files (--signature), not ${signatures.length}`,
      'signature',
    );
  const signed = signatures.map(({ name, value }) => {
    const document = (typeof value === 'object' && value !== null ? value : {}) as Record<string, unknown>;
    if (
      document.format !== APPROVER_SET_SIGNATURE_FORMAT ||
      typeof document.kid !== 'string' ||
      typeof document.signature !== 'string'
    )
      throw invalidArgument(
        `${name} (--signature) is not a signature file of "batch sign-approvers"`,
        'signature',
        `Give the file "better-compute batch sign-approvers … --out FILE" wrote (format ${APPROVER_SET_SIGNATURE_FORMAT}).`,
      );
    return {
      name,
      set: readApproverSet(document.set, name),
      kid: document.kid.slice(0, 64),
      signature: document.signature.slice(0, 128),
    };
  });
  if (
    options.threshold !== undefined &&
    given.threshold !== undefined &&
    given.threshold !== options.threshold
  )
    throw invalidArgument(
      `${next.name} sets threshold ${String(given.threshold)}, not --threshold ${options.threshold}`,
      'threshold',
    );
  // The set file may leave out the epoch and threshold, as `batch sign-approvers` takes them as
  // flags; the signatures then say them, and must all say the same.
  const set = readApproverSet(
    {
      ...given,
      epoch: given.epoch ?? signed[0]!.set.epoch,
      threshold: options.threshold ?? given.threshold ?? signed[0]!.set.threshold,
    },
    next.name,
  );
  const digest = approverSetDigest(set);
  for (const { name, set: theirs } of signed)
    if (approverSetDigest(theirs) !== digest)
      throw invalidArgument(
        `${name} signs another set than ${next.name}: ${setDifferences(theirs, set)}`,
        'signature',
        'Every approver signs the same set file at the same --epoch and --threshold.',
      );
  const offered: ApproverSetSignature[] = signed.map(({ kid, signature }) => ({ kid, signature }));
  const verdict = verifyApproverSetChange(current, set, offered);
  if (!verdict.ok) {
    throw new ComputeError('INVALID_STATE', `the approver set was not changed: ${verdict.reason}`, {
      hint: `${current.threshold} distinct approvers of the current set (epoch ${current.epoch}: ${current.approvers.map((a) => a.kid).join(', ')}) must sign the set at epoch ${current.epoch + 1}.`,
      details: { signedBy: verdict.signedBy },
    });
  }
  // The chain keeps the signatures that count, once per key, so every reader re-verifies the same.
  const kept: ApproverSetSignature[] = [];
  for (const signature of offered)
    if (
      !kept.some((k) => k.kid === signature.kid) &&
      verifyApproverSetChange(current, set, [signature]).signedBy.length === 1
    )
      kept.push(signature);
  const entry: ApproverChainEntry = { set, signatures: kept };
  const now = options.now ?? new Date();
  const document = { ...bundle.document, approvers: [...(bundle.document.approvers ?? []), entry] };
  return { bundle: await replaceBundle(bundle, document, now), entry };
}
