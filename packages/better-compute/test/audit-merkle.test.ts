/**
 * The Merkle code against every third-party vector in fixtures/merkle (happy paths verify, every
 * mutation is refused), and the proofs this code builds against its own verifiers.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  consistencyProof,
  inclusionProof,
  leafHash,
  MerkleLevels,
  rootOf,
  TreeBuilder,
  verifyConsistency,
  verifyInclusion,
  verifySubtreeConsistency,
  verifySubtreeInclusion,
} from '../src/audit/merkle.js';

const FIXTURES = join(import.meta.dirname, 'fixtures', 'merkle');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return files(path);
    return name.endsWith('.json') ? [path] : [];
  });
}

const b64 = (value: string | null | undefined) => new Uint8Array(Buffer.from(value ?? '', 'base64'));
const proofOf = (value: string[] | null) => (value ?? []).map(b64);

interface Vector {
  path: string;
  json: Record<string, any>;
}

function vectors(kind: string): Vector[] {
  return files(join(FIXTURES, kind)).map((path) => ({
    path: path.slice(FIXTURES.length + 1),
    json: JSON.parse(readFileSync(path, 'utf8')),
  }));
}

const verifiers: Record<string, (v: Record<string, any>) => { ok: boolean }> = {
  inclusion: (v) => verifyInclusion(v.leafIdx, v.treeSize, b64(v.leafHash), proofOf(v.proof), b64(v.root)),
  consistency: (v) => verifyConsistency(v.size1, v.size2, proofOf(v.proof), b64(v.root1), b64(v.root2)),
  subtreeinclusion: (v) =>
    verifySubtreeInclusion(v.leafIdx, v.start, v.end, b64(v.leafHash), proofOf(v.proof), b64(v.root)),
  subtreeconsistency: (v) =>
    verifySubtreeConsistency(v.start, v.end, v.size, proofOf(v.proof), b64(v.root1), b64(v.root2)),
};

describe('third-party Merkle vectors', () => {
  for (const [kind, verify] of Object.entries(verifiers)) {
    it(`${kind}: every happy path verifies and every mutation is refused`, () => {
      const all = vectors(kind);
      expect(all.length).toBeGreaterThan(40);
      const wrong = all.filter(({ json }) => verify(json).ok === json.wantErr).map((v) => v.path);
      expect(wrong).toEqual([]);
      expect(all.some((v) => !v.json.wantErr)).toBe(true);
      expect(all.some((v) => v.json.wantErr)).toBe(true);
    });
  }
});

describe('proofs built here', () => {
  const leaves = Array.from({ length: 37 }, (_, i) => leafHash(Buffer.from(`entry ${i}`)));

  it('the incremental builder agrees with the recursive tree head at every size', () => {
    const builder = new TreeBuilder();
    expect(Buffer.from(builder.root()).toString('hex')).toBe(
      'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    );
    for (let size = 1; size <= leaves.length; size++) {
      builder.append(leaves[size - 1]!);
      expect(builder.root()).toEqual(rootOf(leaves, 0, size));
    }
  });

  it('the level cache answers every range as the recursive tree head does', () => {
    const levels = new MerkleLevels(leaves);
    for (let start = 0; start <= leaves.length; start++) {
      for (let end = start; end <= leaves.length; end++) {
        expect(levels.root(start, end)).toEqual(rootOf(leaves, start, end));
      }
    }
  });

  it('every inclusion and consistency proof verifies, and fails against a neighbour', () => {
    for (let size = 1; size <= leaves.length; size++) {
      const root = rootOf(leaves, 0, size);
      for (let index = 0; index < size; index++) {
        const proof = inclusionProof(leaves, index, size);
        expect(verifyInclusion(index, size, leaves[index]!, proof, root).ok).toBe(true);
        if (size > 1) {
          const other = (index + 1) % size;
          expect(verifyInclusion(other, size, leaves[index]!, proof, root).ok).toBe(false);
        }
      }
      for (let first = 1; first <= size; first++) {
        const proof = first === size ? [] : consistencyProof(leaves, first, size);
        const root1 = rootOf(leaves, 0, first);
        expect(verifyConsistency(first, size, proof, root1, root).ok).toBe(true);
        if (first < size) {
          expect(verifyConsistency(first, size, proof, rootOf(leaves, 0, first + 1), root).ok).toBe(false);
        }
      }
    }
  });
});
