/**
 * Scope leaves and their tree: the leaf encoding is pinned byte for byte, the root is RFC 6962's
 * tree head computed independently here, and any change of a leaf, its payload or the order
 * changes it. Bad leaves are refused with the field named; a scope file whose leaves do not give
 * the root it claims is SCOPE_MISMATCH.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ComputeError } from '../src/errors.js';
import {
  leafBytes,
  leafProblem,
  parseLeaves,
  readScopeFile,
  SCOPE_FORMAT,
  type ScopeLeaf,
  scopeTree,
  toHex,
} from '../src/quorum/index.js';

const node = (n: number) => `node_01k5w${String(n).padStart(21, '0')}`;
const sha = (...parts: Uint8Array[]) => {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part);
  return new Uint8Array(hash.digest());
};
const leafHashOf = (leaf: ScopeLeaf) => sha(Uint8Array.of(0), leafBytes(leaf));
const inner = (l: Uint8Array, r: Uint8Array) => sha(Uint8Array.of(1), l, r);

const power: ScopeLeaf = { subject: node(1), kind: 'metal.power', payload: { action: 'off' } };
const deploy: ScopeLeaf = { subject: node(2), kind: 'metal.deploy', payload: { image: 'img_ubuntu-24.04' } };
const remove: ScopeLeaf = { subject: node(3), kind: 'node.delete', payload: {} };

describe('scope leaves', () => {
  it('encode as version, length-prefixed subject and kind, then the payload fields in the kind’s order', () => {
    const u32 = (n: number) => Buffer.from([0, 0, 0, n]).toString('hex');
    const text = (s: string) => u32(Buffer.byteLength(s)) + Buffer.from(s).toString('hex');
    expect(Buffer.from(leafBytes(power)).toString('hex')).toBe(
      '01' + text(node(1)) + text('metal.power') + '01' + u32(1) + text('action') + '01' + text('off'),
    );
    // An optional field absent is encoded as absent, not as an empty string.
    expect(Buffer.from(leafBytes(deploy)).toString('hex')).toBe(
      '01' +
        text(node(2)) +
        text('metal.deploy') +
        '01' +
        u32(2) +
        text('image') +
        '01' +
        text('img_ubuntu-24.04') +
        text('profile') +
        '00',
    );
    expect(leafBytes({ ...deploy, payload: { image: 'img_ubuntu-24.04', profile: '' } })).not.toEqual(
      leafBytes(deploy),
    );
    // Unbound: any payload of the kind.
    expect(Buffer.from(leafBytes({ ...power, payload: null })).toString('hex')).toBe(
      '01' + text(node(1)) + text('metal.power') + '00',
    );
  });

  it('do not depend on the payload object’s key order', () => {
    const a: ScopeLeaf = { ...deploy, payload: { image: 'img_a', profile: 'raid1' } };
    const b: ScopeLeaf = { ...deploy, payload: { profile: 'raid1', image: 'img_a' } };
    expect(leafBytes(a)).toEqual(leafBytes(b));
  });

  it('are refused when the kind, subject or payload is not the kind’s message', () => {
    expect(leafProblem(power)).toBeNull();
    expect(leafProblem({ ...power, payload: null })).toBeNull();
    expect(leafProblem({ ...power, kind: 'metal.power-on' })).toMatch(/not a destructive command kind/);
    expect(leafProblem({ ...power, subject: 'inst_01k5w0000000000000000001' })).toMatch(/must be a node id/);
    expect(leafProblem({ ...power, payload: { action: 'on' } })).toMatch(/one of off, reset, cycle/);
    expect(leafProblem({ ...power, payload: { action: 'off', force: 'yes' } })).toMatch(
      /no payload field "force"/,
    );
    expect(leafProblem({ ...deploy, payload: {} })).toMatch(/needs the payload field "image"/);
    expect(leafProblem({ ...deploy, payload: { image: 'img\u0000x' } })).toMatch(
      /without control characters/,
    );
    // A lone surrogate would encode as U+FFFD, like another string: refused.
    expect(leafProblem({ ...deploy, payload: { image: 'img_\ud800' } })).toMatch(/"image"/);
    expect(leafProblem({ subject: node(1), kind: 'metal.power' })).toMatch(/needs a payload/);
    expect(leafProblem({ ...power, extra: 1 })).toMatch(/no field "extra"/);
    expect(() => parseLeaves([power, { ...power, payload: { action: 'on' } }])).toThrow(
      /leaf 1 of the scope/,
    );
    expect(() => parseLeaves([])).toThrow(/no leaves/);
  });
});

describe('the scope root', () => {
  it('is the RFC 6962 tree head over the leaves in order, and the size their count', () => {
    const leaves = [power, deploy, remove];
    const [h0, h1, h2] = leaves.map(leafHashOf) as [Uint8Array, Uint8Array, Uint8Array];
    const tree = scopeTree(leaves);
    expect(tree.size).toBe(3);
    expect(toHex(tree.root)).toBe(toHex(inner(inner(h0, h1), h2)));
    expect(toHex(scopeTree([power]).root)).toBe(toHex(h0));
    const five = [power, deploy, remove, { ...power, subject: node(4) }, { ...power, subject: node(5) }];
    const h = five.map(leafHashOf);
    expect(toHex(scopeTree(five).root)).toBe(
      toHex(inner(inner(inner(h[0]!, h[1]!), inner(h[2]!, h[3]!)), h[4]!)),
    );
  });

  it('changes with any leaf, payload or the order', () => {
    const root = toHex(scopeTree([power, deploy, remove]).root);
    const variants: ScopeLeaf[][] = [
      [deploy, power, remove],
      [{ ...power, payload: { action: 'reset' } }, deploy, remove],
      [{ ...power, subject: node(9) }, deploy, remove],
      [{ ...power, payload: null }, deploy, remove],
      [power, deploy],
      [power, deploy, remove, remove],
    ];
    for (const leaves of variants) expect(toHex(scopeTree(leaves).root)).not.toBe(root);
  });
});

describe('the scope file', () => {
  const leaves = [power, deploy, remove];
  const tree = scopeTree(leaves);
  const file = {
    format: SCOPE_FORMAT,
    batchId: 'batch_01k5w00000000000000000000a',
    trustDomain: 'compute.example.com',
    createdAt: '2026-09-25T12:00:00.000Z',
    notAfter: '2026-09-25T18:00:00.000Z',
    reason: 'reimage rack 12 after the firmware recall',
    leaves,
    root: toHex(tree.root),
    size: 3,
  };

  it('reads when its leaves give its root and size', () => {
    const read = readScopeFile(JSON.parse(JSON.stringify(file)));
    expect(read.statement.size).toBe(3);
    expect(read.statement.notAfter).toBe(Date.parse(file.notAfter));
    expect(read.file.leaves).toEqual(leaves);
  });

  it('is SCOPE_MISMATCH when a leaf changed after the root was computed, or the size is wrong', () => {
    const code = (value: unknown) => {
      try {
        readScopeFile(value);
        return 'read';
      } catch (error) {
        return (error as ComputeError).code;
      }
    };
    expect(code({ ...file, leaves: [{ ...power, payload: { action: 'cycle' } }, deploy, remove] })).toBe(
      'SCOPE_MISMATCH',
    );
    expect(code({ ...file, leaves: [deploy, power, remove] })).toBe('SCOPE_MISMATCH');
    expect(code({ ...file, size: 4 })).toBe('SCOPE_MISMATCH');
    expect(code({ ...file, root: 'ab'.repeat(32) })).toBe('SCOPE_MISMATCH');
    expect(code({ ...file, root: file.root.toUpperCase() })).toBe('INVALID_ARGUMENT');
    expect(code({ ...file, notAfter: '2026-09-25T18:00:00Z' })).toBe('INVALID_ARGUMENT');
    expect(code({ ...file, trustDomain: 'Compute.Example.com' })).toBe('INVALID_ARGUMENT');
    expect(code({ ...file, format: 'other' })).toBe('INVALID_ARGUMENT');
  });
});
