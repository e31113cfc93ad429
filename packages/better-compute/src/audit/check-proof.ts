/**
 * `audit check-proof`: checks a proof file offline, with nothing but the audit key's pin. The leaf
 * hash is recomputed from the entry, the inclusion proof must lead to the checkpoint's root, the
 * checkpoint must be signed by a key whose pin is the one given, and its origin must be the entry's
 * tenant's log; a consistency proof, when present, must show the earlier checkpoint (signed under
 * the same pin) is a prefix of this one. Any mismatch is INVALID_PROOF, naming what failed.
 */
import { ComputeError } from '@better-compute/core';
import { parseCheckpoint, type Checkpoint } from './checkpoint.js';
import { entryLeafHash, parseEntry, type AuditEntry } from './entry.js';
import { verifyConsistency, verifyInclusion } from './merkle.js';
import { parseVerifierKey, publicKeyPinOf, verifyNote } from './note.js';
import { PROOF_FORMAT } from './prove.js';
import type { WitnessVerifier } from './cosignature.js';
import {
  notAncestor,
  openTrusted,
  witnessRefusal,
  witnessReport,
  type TrustedInput,
  type WitnessReport,
} from './trusted.js';

export interface CheckedProof {
  ok: true;
  entryId: string;
  tenant: string;
  leafIndex: number;
  treeSize: number;
  origin: string;
  rootHash: string;
  pin: string;
  consistentFrom?: number;
  /** With `--trusted`: each kept checkpoint, every one an ancestor of the proof's (else AUDIT_TAMPERED). */
  trusted?: { size: number; rootHash: string; ancestor: true }[];
  witnesses?: WitnessReport;
}

/** What `check-proof --trusted` (and `--witness`) adds to the check. */
export interface TrustedCheck {
  inputs: readonly TrustedInput[];
  file: string;
  witnesses?: { verifiers: readonly WitnessVerifier[]; min: number } | undefined;
}

function invalid(message: string): never {
  throw new ComputeError('INVALID_PROOF', message, {
    hint: 'The proof file or the pin is not the one the deployment published; ask for a fresh proof.',
  });
}

const BASE64_HASH = /^[A-Za-z0-9+/]{43}=$/;

function hashes(value: unknown, what: string): Uint8Array[] {
  if (!Array.isArray(value) || value.some((h) => typeof h !== 'string' || !BASE64_HASH.test(h))) {
    invalid(`${what} is not a list of base64 SHA-256 hashes`);
  }
  return (value as string[]).map((h) => new Uint8Array(Buffer.from(h, 'base64')));
}

function wholeNumber(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    invalid(`${what} is not a whole number`);
  }
  return value;
}

/** The checkpoint a signed note carries, checked under the pin. */
function signedCheckpoint(note: unknown, signer: unknown, pin: string, what: string): Checkpoint {
  if (typeof note !== 'string' || typeof signer !== 'string') invalid(`the ${what} or its signer is missing`);
  const key = parseVerifierKey(signer);
  if (!key) invalid(`the ${what}'s signer is not an Ed25519 verifier key`);
  if (publicKeyPinOf(key.publicKey) !== pin) {
    invalid(`the ${what} is signed by a key whose pin is not ${pin}`);
  }
  const verdict = verifyNote(note, key.name, key.publicKey);
  if (!verdict.ok) invalid(`the ${what}'s signature does not verify: ${verdict.reason}`);
  const body = parseCheckpoint(verdict.text);
  if ('error' in body) invalid(`the ${what} is malformed: ${body.error}`);
  if (body.origin !== key.name) invalid(`the ${what}'s origin is not the name of the key that signed it`);
  return body;
}

export function checkProof(document: unknown, pin: string, trusted?: TrustedCheck): CheckedProof {
  if (typeof document !== 'object' || document === null || Array.isArray(document)) {
    invalid('the proof is not a JSON object');
  }
  const proof = document as Record<string, unknown>;
  if (proof.format !== PROOF_FORMAT) invalid(`the proof's format is not ${PROOF_FORMAT}`);
  const parsed = parseEntry(proof.entry);
  if ('error' in parsed) invalid(parsed.error);
  const entry: AuditEntry = parsed;
  const leafIndex = wholeNumber(proof.leafIndex, 'the leaf index');
  const treeSize = wholeNumber(proof.treeSize, 'the tree size');
  const inclusion = hashes(proof.inclusion, 'the inclusion proof');
  const checkpoint = signedCheckpoint(proof.checkpoint, proof.signer, pin, 'checkpoint');
  if (!checkpoint.origin.endsWith(`/audit/${entry.tenant}`)) {
    invalid(`the checkpoint is of log "${checkpoint.origin}", not tenant ${entry.tenant}'s`);
  }
  if (checkpoint.size !== treeSize) {
    invalid(`the checkpoint is of a tree of ${checkpoint.size}, the proof says ${treeSize}`);
  }
  const included = verifyInclusion(leafIndex, treeSize, entryLeafHash(entry), inclusion, checkpoint.root);
  if (!included.ok) {
    invalid(`the entry is not included at leaf ${leafIndex} of the checkpoint: ${included.reason}`);
  }
  const result: CheckedProof = {
    ok: true,
    entryId: entry.id,
    tenant: entry.tenant,
    leafIndex,
    treeSize,
    origin: checkpoint.origin,
    rootHash: Buffer.from(checkpoint.root).toString('base64'),
    pin,
  };
  if (proof.consistency !== undefined) {
    const consistency = proof.consistency as Record<string, unknown> | null;
    if (typeof consistency !== 'object' || consistency === null)
      invalid('the consistency proof is malformed');
    const fromSize = wholeNumber(consistency.fromSize, 'the consistency proof size');
    const earlier = signedCheckpoint(consistency.checkpoint, consistency.signer, pin, 'earlier checkpoint');
    if (earlier.origin !== checkpoint.origin) invalid('the earlier checkpoint is of another log');
    if (earlier.size !== fromSize) invalid(`the earlier checkpoint is of ${earlier.size}, not ${fromSize}`);
    const verdict = verifyConsistency(
      fromSize,
      treeSize,
      hashes(consistency.proof, 'the consistency proof'),
      earlier.root,
      checkpoint.root,
    );
    if (!verdict.ok) invalid(`the checkpoint does not extend the earlier one: ${verdict.reason}`);
    result.consistentFrom = fromSize;
  }
  if (trusted) checkTrusted(proof, checkpoint, pin, trusted, result);
  return result;
}

/**
 * Each kept checkpoint must be an ancestor of the proof's, by the consistency proof the file carries
 * for its size (`audit prove --trusted`): one larger than the proof's tree, or whose proof fails, is
 * AUDIT_TAMPERED naming it; a size the file has no proof for is INVALID_PROOF (ask for one).
 */
function checkTrusted(
  proof: Record<string, unknown>,
  checkpoint: Checkpoint,
  pin: string,
  trusted: TrustedCheck,
  result: CheckedProof,
): void {
  const kept = openTrusted(trusted.inputs, {
    tenantId: result.tenant,
    pin,
    keys: [proof.signer as string],
    file: trusted.file,
  });
  const ancestors = new Map<number, Uint8Array[]>();
  if (proof.ancestors !== undefined) {
    if (!Array.isArray(proof.ancestors)) invalid('the ancestors of the proof are not a list');
    for (const item of proof.ancestors as unknown[]) {
      const entry = (typeof item === 'object' && item !== null ? item : {}) as Record<string, unknown>;
      ancestors.set(wholeNumber(entry.size, 'an ancestor size'), hashes(entry.proof, 'an ancestor proof'));
    }
  }
  result.trusted = kept.map((one) => {
    const given = ancestors.get(one.size);
    // Of the proof's own size no proof is needed: the roots are compared.
    if (!given && one.size < checkpoint.size) {
      invalid(
        `the proof file carries no consistency proof from the kept checkpoint of size ${one.size}: make it with audit prove --trusted`,
      );
    }
    const reason = notAncestor(one, checkpoint, given ?? []);
    if (reason) {
      throw new ComputeError(
        'AUDIT_TAMPERED',
        `the kept checkpoint of size ${one.size} and root ${one.rootHex} (hex) is no longer an ancestor of the log's checkpoint ${checkpoint.size}: ${reason}`,
        {
          hint: 'Keep the checkpoint file: it is signed by the audit key, and the log no longer extends it.',
        },
      );
    }
    return { size: one.size, rootHash: one.rootHash, ancestor: true as const };
  });
  if (trusted.witnesses) {
    const notes = [
      ...kept.map((one) => ({ size: one.size, rootHash: one.rootHash, note: one.note })),
      { size: checkpoint.size, rootHash: result.rootHash, note: proof.checkpoint as string },
    ];
    result.witnesses = witnessReport(notes, trusted.witnesses.verifiers, trusted.witnesses.min);
    const refusal = witnessRefusal(result.witnesses, trusted.witnesses.verifiers.length);
    if (refusal) throw refusal;
  }
}
