/**
 * Wycheproof's ECDSA P-256 SHA-256 vectors (IEEE P1363 encoding, the approvals' own) through the
 * verifier every approval and approver-set signature goes through: every valid vector accepted,
 * every invalid one refused. The file has no "acceptable" vectors; our rule for them would be to
 * refuse (docs/decisions/quorum-signatures.md), and the test fails if a new copy brings some.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fromBase64url, publicKeyFromSpki, toBase64url, verifyP256 } from '../src/quorum/index.js';

interface Vector {
  tcId: number;
  comment: string;
  msg: string;
  sig: string;
  result: 'valid' | 'invalid' | 'acceptable';
}
interface Group {
  publicKeyDer: string;
  sha: string;
  tests: Vector[];
}

const suite = JSON.parse(
  readFileSync(join(import.meta.dirname, 'fixtures', 'ecdsa_secp256r1_sha256_p1363_test.json'), 'utf8'),
) as { schema: string; numberOfTests: number; testGroups: Group[] };
const hex = (text: string) => new Uint8Array(Buffer.from(text, 'hex'));

describe('Wycheproof ECDSA P-256 SHA-256 (P1363) through the approval verifier', () => {
  const vectors = suite.testGroups.flatMap((group) => group.tests.map((test) => ({ group, test })));

  it('is the P1363 verify suite, whole', () => {
    expect(suite.schema).toBe('ecdsa_p1363_verify_schema_v1.json');
    expect(vectors).toHaveLength(suite.numberOfTests);
    expect(suite.testGroups.every((group) => group.sha === 'SHA-256')).toBe(true);
    expect(vectors.filter(({ test }) => test.result === 'acceptable')).toEqual([]);
  });

  it('accepts every valid vector and refuses every invalid one', () => {
    const wrong: string[] = [];
    for (const { group, test } of vectors) {
      const key = publicKeyFromSpki(hex(group.publicKeyDer));
      expect(key, `the group key of tcId ${test.tcId}`).not.toBeNull();
      const accepted = verifyP256(key!, hex(test.msg), hex(test.sig));
      if (accepted !== (test.result === 'valid'))
        wrong.push(`${test.tcId} (${test.comment}): ${test.result} but ${accepted ? 'accepted' : 'refused'}`);
    }
    expect(wrong).toEqual([]);
    expect(vectors.filter(({ test }) => test.result === 'valid').length).toBeGreaterThan(150);
    expect(vectors.filter(({ test }) => test.result === 'invalid').length).toBeGreaterThan(80);
  });

  it('carries signatures as one base64url spelling, so the wire form changes nothing', () => {
    const { group, test } = vectors.find(({ test }) => test.result === 'valid' && test.sig.length === 128)!;
    const text = toBase64url(hex(test.sig));
    expect(
      verifyP256(publicKeyFromSpki(hex(group.publicKeyDer))!, hex(test.msg), fromBase64url(text, 64)!),
    ).toBe(true);
    expect(fromBase64url(`${text}=`, 64)).toBeNull();
  });
});
