/**
 * Approver sets and their changes: a set is read only when its keys are P-256, its kids match and
 * its threshold fits; a new set at epoch N+1 is accepted only with a threshold of signatures by the
 * CURRENT set's keys, and never at N+2, for another trust domain, or on the new keys' word alone.
 */
import { createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  type ApproverSet,
  encodePublicKey,
  keyId,
  readApproverSet,
  signApproverSet,
  verifyApproverSetChange,
} from '../src/quorum/index.js';

const newKey = () => generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey;
const current = [newKey(), newKey(), newKey()];
const incoming = [newKey(), newKey()];
const pub = (key: KeyObject) => encodePublicKey(createPublicKey(key));
const kidOf = (key: KeyObject) => keyId(createPublicKey(key));

const setOf = (
  epoch: number,
  members: KeyObject[],
  threshold: number,
  trustDomain = 'compute.example.com',
): ApproverSet =>
  readApproverSet({
    trustDomain,
    epoch,
    threshold,
    approvers: members.map((key) => ({ publicKey: pub(key) })),
  });

const published = setOf(4, current, 2);
const next = setOf(5, [current[0]!, ...incoming], 2);
const signBy = (keys: KeyObject[], set: ApproverSet) =>
  keys.map((key) => signApproverSet(key, kidOf(key), set));

describe('reading an approver set', () => {
  it('fills in kids, sorts by kid and takes PEM keys as the .pub file has them', () => {
    const pem = createPublicKey(current[0]!).export({ type: 'spki', format: 'pem' }) as string;
    const set = readApproverSet({
      trustDomain: 'compute.example.com',
      epoch: 1,
      threshold: 1,
      approvers: [{ publicKey: pem }],
    });
    expect(set.approvers).toEqual([{ kid: kidOf(current[0]!), publicKey: pub(current[0]!) }]);
    const kids = published.approvers.map((a) => a.kid);
    expect(kids).toEqual([...kids].sort());
  });

  it('refuses a wrong kid, a key twice, a threshold that does not fit, another curve', () => {
    const base = { trustDomain: 'compute.example.com', epoch: 1, threshold: 1 };
    const ed = generateKeyPairSync('ed25519')
      .publicKey.export({ type: 'spki', format: 'der' })
      .toString('base64url');
    const p384 = generateKeyPairSync('ec', { namedCurve: 'secp384r1' })
      .publicKey.export({ type: 'spki', format: 'der' })
      .toString('base64url');
    const cases: [unknown, RegExp][] = [
      [
        { ...base, approvers: [{ kid: kidOf(current[1]!), publicKey: pub(current[0]!) }] },
        /kid is not its key's/,
      ],
      [
        { ...base, approvers: [{ publicKey: pub(current[0]!) }, { publicKey: pub(current[0]!) }] },
        /listed twice/,
      ],
      [{ ...base, threshold: 2, approvers: [{ publicKey: pub(current[0]!) }] }, /"threshold"/],
      [{ ...base, threshold: 0, approvers: [{ publicKey: pub(current[0]!) }] }, /"threshold"/],
      [{ ...base, epoch: 0, approvers: [{ publicKey: pub(current[0]!) }] }, /"epoch"/],
      [{ ...base, approvers: [{ publicKey: ed }] }, /no P-256 public key/],
      [{ ...base, approvers: [{ publicKey: p384 }] }, /no P-256 public key/],
      [{ ...base, approvers: [] }, /"approvers"/],
    ];
    for (const [value, message] of cases) expect(() => readApproverSet(value)).toThrow(message);
  });
});

describe('changing the approver set', () => {
  it('is refused at epoch N+1 with too few of the current approvers', () => {
    const verdict = verifyApproverSetChange(published, next, signBy([current[0]!], next));
    expect(verdict).toMatchObject({ ok: false, signedBy: [kidOf(current[0]!)] });
  });

  it('is accepted at epoch N+1 with a threshold of the current approvers', () => {
    const verdict = verifyApproverSetChange(published, next, signBy([current[0]!, current[2]!], next));
    expect(verdict.ok).toBe(true);
    expect(verdict.signedBy).toHaveLength(2);
  });

  it('counts neither the incoming keys, nor one key twice, nor a signature over another set', () => {
    const incomingOnly = signBy(incoming, next);
    expect(verifyApproverSetChange(published, next, incomingOnly).ok).toBe(false);
    const twice = signBy([current[1]!, current[1]!], next);
    expect(verifyApproverSetChange(published, next, twice).ok).toBe(false);
    const otherThreshold = setOf(5, [current[0]!, ...incoming], 1);
    expect(
      verifyApproverSetChange(published, next, signBy([current[0]!, current[1]!], otherThreshold)).ok,
    ).toBe(false);
  });

  it('is refused at epoch N+2, at the same epoch, and for another trust domain, however many signed', () => {
    const skip = setOf(6, [current[0]!, ...incoming], 2);
    expect(verifyApproverSetChange(published, skip, signBy(current, skip))).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/epoch is 6/),
    });
    const same = setOf(4, [current[0]!, ...incoming], 2);
    expect(verifyApproverSetChange(published, same, signBy(current, same)).ok).toBe(false);
    const foreign = setOf(5, [current[0]!, ...incoming], 2, 'other.example.com');
    expect(verifyApproverSetChange(published, foreign, signBy(current, foreign)).ok).toBe(false);
  });
});
