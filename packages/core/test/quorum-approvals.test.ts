/**
 * Approvals and the quorum check with real P-256 keys: a threshold of distinct approvers of the
 * set inside the window passes; an approval for another trust domain, root, size, batch id or
 * window, an expired window, a key outside the set and a replayed (or re-spelled) approval by the
 * same key are each refused.
 */
import { createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  approvalFile,
  type ApprovalSignature,
  type ApproverSet,
  type BatchStatement,
  encodePublicKey,
  fromBase64url,
  keyId,
  readApprovalFile,
  readApproverSet,
  signApproval,
  toBase64url,
  verifyApprovals,
} from '../src/quorum/index.js';

const newKey = () => generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey;
const keys = [newKey(), newKey(), newKey()];
const outsider = newKey();
const set: ApproverSet = readApproverSet({
  trustDomain: 'compute.example.com',
  epoch: 1,
  threshold: 2,
  approvers: keys.map((key) => ({ publicKey: encodePublicKey(createPublicKey(key)) })),
});
const batch: BatchStatement = {
  batchId: 'batch_01k5w00000000000000000000a',
  trustDomain: 'compute.example.com',
  root: new Uint8Array(32).fill(7),
  size: 3,
  notAfter: Date.parse('2026-09-25T18:00:00.000Z'),
};
const before = batch.notAfter - 60_000;
const sign = (key: KeyObject, statement: BatchStatement = batch) => signApproval(key, statement);

/** The same signature with s replaced by n - s: the high-S twin, as valid as the original. */
function malleate(approval: ApprovalSignature): ApprovalSignature {
  const n = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
  const bytes = fromBase64url(approval.signature, 64)!;
  const s = BigInt(`0x${Buffer.from(bytes.subarray(32)).toString('hex')}`);
  const twin = Buffer.from((n - s).toString(16).padStart(64, '0'), 'hex');
  return { kid: approval.kid, signature: toBase64url(new Uint8Array([...bytes.subarray(0, 32), ...twin])) };
}

describe('the quorum check', () => {
  it('passes with a threshold of distinct approvers of the set, inside the window', () => {
    const one = verifyApprovals(set, batch, [sign(keys[0]!)], before);
    expect(one).toMatchObject({ ok: false, needed: 2, approvedBy: [keyId(createPublicKey(keys[0]!))] });
    const two = verifyApprovals(set, batch, [sign(keys[0]!), sign(keys[2]!)], before);
    expect(two.ok).toBe(true);
    expect(two.approvedBy).toHaveLength(2);
  });

  it('counts a replayed approval, or its high-S twin, once', () => {
    const first = sign(keys[0]!);
    const again = verifyApprovals(set, batch, [first, first, sign(keys[0]!), malleate(first)], before);
    expect(again.ok).toBe(false);
    expect(again.approvedBy).toHaveLength(1);
    expect(again.refused.map((r) => r.reason)).toEqual(Array(3).fill('a second approval by the same key'));
    // The twin verifies on its own (Wycheproof's rule), so only the per-key count stops it.
    expect(verifyApprovals(set, batch, [malleate(first)], before).approvedBy).toHaveLength(1);
  });

  it('refuses approvals of another trust domain, root, size, batch or window', () => {
    const others: BatchStatement[] = [
      { ...batch, trustDomain: 'other.example.com' },
      { ...batch, root: new Uint8Array(32).fill(8) },
      { ...batch, size: 4 },
      { ...batch, batchId: 'batch_01k5w00000000000000000000b' },
      { ...batch, notAfter: batch.notAfter + 3_600_000 },
    ];
    for (const other of others) {
      const result = verifyApprovals(set, batch, [sign(keys[0]!, other), sign(keys[1]!, other)], before);
      expect(result.ok).toBe(false);
      expect(result.approvedBy).toEqual([]);
      expect(result.refused).toHaveLength(2);
    }
  });

  it('counts nothing for a batch of another trust domain than the set’s, or after the window', () => {
    const foreign = { ...batch, trustDomain: 'other.example.com' };
    const signed = [sign(keys[0]!, foreign), sign(keys[1]!, foreign)];
    expect(verifyApprovals(set, foreign, signed, before)).toMatchObject({ ok: false, approvedBy: [] });
    expect(verifyApprovals(set, foreign, signed, before).reason).toMatch(/trust domain/);
    const good = [sign(keys[0]!), sign(keys[1]!)];
    expect(verifyApprovals(set, batch, good, batch.notAfter - 1).ok).toBe(true);
    expect(verifyApprovals(set, batch, good, batch.notAfter)).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/window closed/),
    });
  });

  it('refuses keys outside the set, a kid that is not the signer’s, and malformed signatures', () => {
    const outside = sign(outsider);
    const borrowed = { kid: keyId(createPublicKey(keys[1]!)), signature: sign(keys[0]!).signature };
    const garbage = [
      { kid: set.approvers[0]!.kid, signature: 'not base64url!' },
      { kid: set.approvers[0]!.kid, signature: toBase64url(new Uint8Array(64)) },
      { kid: set.approvers[0]!.kid, signature: `${sign(keys[0]!).signature}A` },
      null as unknown as ApprovalSignature,
    ];
    const result = verifyApprovals(set, batch, [outside, borrowed, ...garbage], before);
    expect(result.approvedBy).toEqual([]);
    expect(result.refused).toHaveLength(6);
  });
});

describe('the approval file', () => {
  const approval = sign(keys[0]!);
  const file = JSON.parse(JSON.stringify(approvalFile(batch, approval)));
  const keyOf = (kid: string) => keys.map((key) => createPublicKey(key)).find((key) => keyId(key) === kid);
  const codeOf = (value: unknown, statement = batch) => {
    try {
      readApprovalFile(value, statement, keyOf);
      return 'read';
    } catch (error) {
      return (error as { code: string }).code;
    }
  };

  it('reads for its own batch', () => {
    expect(readApprovalFile(file, batch, keyOf)).toEqual(approval);
  });

  it('is SCOPE_MISMATCH for another batch, root, window or trust domain, or a signature of something else', () => {
    expect(codeOf(file, { ...batch, batchId: 'batch_01k5w00000000000000000000b' })).toBe('SCOPE_MISMATCH');
    expect(codeOf(file, { ...batch, root: new Uint8Array(32) })).toBe('SCOPE_MISMATCH');
    expect(codeOf(file, { ...batch, trustDomain: 'other.example.com' })).toBe('SCOPE_MISMATCH');
    expect(codeOf(file, { ...batch, notAfter: batch.notAfter + 1000 })).toBe('SCOPE_MISMATCH');
    expect(codeOf({ ...file, signature: sign(keys[0]!, { ...batch, size: 9 }).signature })).toBe(
      'SCOPE_MISMATCH',
    );
    expect(codeOf({ ...file, format: 'x' })).toBe('INVALID_ARGUMENT');
  });
});
