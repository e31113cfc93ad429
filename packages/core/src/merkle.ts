/**
 * The Merkle tree of RFC 6962 (and RFC 9162 §2.1): SHA-256 leaf hashes `H(0x00 || entry)`, interior
 * hashes `H(0x01 || left || right)`, the tree head of an ordered list of leaves, inclusion and
 * consistency proofs and their verification. Also the subtree proofs of the Merkle Tree
 * Certificates draft (a subtree `[start, end)` where `start` is a multiple of the smallest power of
 * two at least `end - start`), which the third-party vectors exercise.
 *
 * Tree sizes and indexes are JavaScript numbers up to 2^53 - 1; the path arithmetic runs on bigints
 * so no 32-bit bit operator ever truncates them. Verification never throws: it answers a reason.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

export type Hash = Uint8Array;

export const HASH_SIZE = 32;

function sha256(...parts: Uint8Array[]): Hash {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part);
  return new Uint8Array(hash.digest());
}

/** The root of the empty tree: SHA-256 of nothing. */
export const EMPTY_ROOT: Hash = sha256();

export function leafHash(entry: Uint8Array): Hash {
  return sha256(Uint8Array.of(0), entry);
}

export function nodeHash(left: Uint8Array, right: Uint8Array): Hash {
  return sha256(Uint8Array.of(1), left, right);
}

export function sameHash(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The largest power of two strictly below n (n ≥ 2). */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** The tree head (MTH) of `leaves` (leaf hashes) in `[start, end)`. */
export function rootOf(leaves: readonly Hash[], start = 0, end = leaves.length): Hash {
  const n = end - start;
  if (n === 0) return EMPTY_ROOT;
  if (n === 1) return leaves[start]!;
  const k = splitPoint(n);
  return nodeHash(rootOf(leaves, start, start + k), rootOf(leaves, start + k, end));
}

/**
 * Appends leaves one at a time and answers the root at any size in O(log n): the stack holds the
 * roots of the perfect subtrees the leaves so far make, largest first.
 */
export class TreeBuilder {
  private readonly stack: { height: number; hash: Hash }[] = [];
  size = 0;

  append(leaf: Hash): void {
    let node = { height: 0, hash: leaf };
    while (this.stack.length > 0 && this.stack[this.stack.length - 1]!.height === node.height) {
      const left = this.stack.pop()!;
      node = { height: node.height + 1, hash: nodeHash(left.hash, node.hash) };
    }
    this.stack.push(node);
    this.size += 1;
  }

  /** Resumes a tree of `size` leaves from its frontier (what `frontier()` answered). */
  static resume(size: number, frontier: readonly Hash[]): TreeBuilder {
    const heights: number[] = [];
    for (let height = 52; height >= 0; height--) {
      if (Math.floor(size / 2 ** height) % 2 === 1) heights.push(height);
    }
    if (heights.length !== frontier.length || frontier.some((h) => h.length !== HASH_SIZE)) {
      throw new RangeError(`a frontier of ${frontier.length} hashes does not fit a tree of ${size}`);
    }
    const builder = new TreeBuilder();
    heights.forEach((height, i) => builder.stack.push({ height, hash: frontier[i]! }));
    builder.size = size;
    return builder;
  }

  /** The roots of the perfect subtrees the leaves make, largest first: all the next leaf needs. */
  frontier(): Hash[] {
    return this.stack.map((node) => node.hash);
  }

  root(): Hash {
    if (this.stack.length === 0) return EMPTY_ROOT;
    let root = this.stack[this.stack.length - 1]!.hash;
    for (let i = this.stack.length - 2; i >= 0; i--) root = nodeHash(this.stack[i]!.hash, root);
    return root;
  }
}

/**
 * Every node of the perfect subtrees a list of leaves makes, built once in O(n): the hash of any
 * range `[start, end)` is then O(log n) (its perfect parts are looked up), so proofs over the same
 * leaves, as `verify` makes one per pair of checkpoints, cost O(log² n) each instead of O(n).
 */
export class MerkleLevels {
  private readonly levels: Hash[][];

  constructor(readonly leaves: readonly Hash[]) {
    this.levels = [[...leaves]];
    for (let below = this.levels[0]!; below.length >= 2;) {
      const level: Hash[] = [];
      for (let i = 0; i + 1 < below.length; i += 2) level.push(nodeHash(below[i]!, below[i + 1]!));
      this.levels.push(level);
      below = level;
    }
  }

  get size(): number {
    return this.leaves.length;
  }

  /** The tree head of the leaves in `[start, end)`, as RFC 6962 splits it. */
  root(start: number, end: number): Hash {
    const n = end - start;
    if (n === 0) return EMPTY_ROOT;
    // A perfect, aligned range is one stored node.
    if ((n & (n - 1)) === 0 && n <= 2 ** 30 && start % n === 0) {
      const height = Math.log2(n);
      return this.levels[height]![start / n]!;
    }
    const k = splitPoint(n);
    return nodeHash(this.root(start, start + k), this.root(start + k, end));
  }
}

const levelsOf = (leaves: readonly Hash[] | MerkleLevels) =>
  leaves instanceof MerkleLevels ? leaves : new MerkleLevels(leaves);

/** The inclusion proof (RFC 6962 PATH) of leaf `index` in the tree of the first `size` leaves. */
export function inclusionProof(leaves: readonly Hash[] | MerkleLevels, index: number, size: number): Hash[] {
  const tree = levelsOf(leaves);
  if (!(size <= tree.size && index >= 0 && index < size)) {
    throw new RangeError(`no leaf ${index} in a tree of ${size}`);
  }
  const path = (m: number, start: number, end: number): Hash[] => {
    const n = end - start;
    if (n <= 1) return [];
    const k = splitPoint(n);
    return m < k
      ? [...path(m, start, start + k), tree.root(start + k, end)]
      : [...path(m - k, start + k, end), tree.root(start, start + k)];
  };
  return path(index, 0, size);
}

/** The consistency proof (RFC 6962 PROOF) that the tree of `size1` leaves is a prefix of `size2`'s. */
export function consistencyProof(
  leaves: readonly Hash[] | MerkleLevels,
  size1: number,
  size2: number,
): Hash[] {
  const tree = levelsOf(leaves);
  if (!(size1 > 0 && size1 <= size2 && size2 <= tree.size)) {
    throw new RangeError(`no consistency proof from ${size1} to ${size2}`);
  }
  const subproof = (m: number, start: number, end: number, complete: boolean): Hash[] => {
    const n = end - start;
    if (m === n) return complete ? [] : [tree.root(start, end)];
    const k = splitPoint(n);
    return m <= k
      ? [...subproof(m, start, start + k, complete), tree.root(start + k, end)]
      : [...subproof(m - k, start + k, end, false), tree.root(start, start + k)];
  };
  return subproof(size1, 0, size2, true);
}

export type Verdict = { ok: true } | { ok: false; reason: string };

const OK: Verdict = { ok: true };
const fail = (reason: string): Verdict => ({ ok: false, reason });

function isSize(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

function proofHashes(proof: readonly Uint8Array[]): string | null {
  return proof.every((p) => p.length === HASH_SIZE) ? null : 'a proof hash is not 32 bytes';
}

const lsb = (x: bigint) => (x & 1n) === 1n;

/** RFC 9162 §2.1.3.2: does `proof` show `leaf` at `index` in the tree of `size` with head `root`? */
export function verifyInclusion(
  index: number,
  size: number,
  leaf: Uint8Array,
  proof: readonly Uint8Array[],
  root: Uint8Array,
): Verdict {
  if (!isSize(index) || !isSize(size)) return fail('the index or tree size is not a whole number');
  if (index >= size) return fail(`leaf index ${index} is outside a tree of ${size}`);
  if (leaf.length !== HASH_SIZE || root.length !== HASH_SIZE) return fail('a hash is not 32 bytes');
  const bad = proofHashes(proof);
  if (bad) return fail(bad);
  const computed = rootFromInclusion(BigInt(index), BigInt(size), leaf, proof);
  if (!computed) return fail('the proof has the wrong number of hashes for this index and size');
  return sameHash(computed, root) ? OK : fail('the proof does not lead to the root');
}

function rootFromInclusion(index: bigint, size: bigint, leaf: Uint8Array, proof: readonly Uint8Array[]) {
  let fn = index;
  let sn = size - 1n;
  let r: Uint8Array = leaf;
  for (const p of proof) {
    if (sn === 0n) return null;
    if (lsb(fn) || fn === sn) {
      r = nodeHash(p, r);
      while (!lsb(fn) && fn !== 0n) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      r = nodeHash(r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  return sn === 0n ? r : null;
}

/** RFC 9162 §2.1.4.2: does `proof` show the tree of `size1` (head `root1`) is a prefix of `size2`'s? */
export function verifyConsistency(
  size1: number,
  size2: number,
  proof: readonly Uint8Array[],
  root1: Uint8Array,
  root2: Uint8Array,
): Verdict {
  if (!isSize(size1) || !isSize(size2)) return fail('a tree size is not a whole number');
  if (size1 > size2) return fail(`the first tree (${size1}) is larger than the second (${size2})`);
  if (size1 === size2) {
    if (proof.length > 0) return fail('the trees are the same size but the proof is not empty');
    if (size1 === 0 && !sameHash(root1, EMPTY_ROOT)) return fail('an empty tree has the wrong root');
    return sameHash(root1, root2) ? OK : fail('the trees are the same size but their roots differ');
  }
  if (size1 === 0) return fail('every tree extends the empty tree: nothing to prove');
  if (proof.length === 0) return fail('the proof is empty');
  const bad = proofHashes(proof);
  if (bad) return fail(bad);
  const path = [...proof];
  let fn = BigInt(size1) - 1n;
  let sn = BigInt(size2) - 1n;
  // A first tree that is a perfect subtree of the second is not repeated in the proof.
  if ((fn & (fn + 1n)) === 0n) path.unshift(root1);
  while (lsb(fn)) {
    fn >>= 1n;
    sn >>= 1n;
  }
  let fr: Uint8Array = path[0]!;
  let sr: Uint8Array = path[0]!;
  for (const c of path.slice(1)) {
    if (sn === 0n) return fail('the proof has too many hashes');
    if (lsb(fn) || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      while (!lsb(fn) && fn !== 0n) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) return fail('the proof has too few hashes');
  if (!sameHash(fr, root1)) return fail('the proof does not lead to the first root');
  if (!sameHash(sr, root2)) return fail('the proof does not lead to the second root');
  return OK;
}

/** A subtree `[start, end)`: non-empty, and `start` a multiple of the least power of two ≥ its size. */
export function isValidSubtree(start: number, end: number): boolean {
  if (!isSize(start) || !isSize(end) || start >= end) return false;
  let ceil = 1n;
  while (ceil < BigInt(end - start)) ceil <<= 1n;
  return BigInt(start) % ceil === 0n;
}

/**
 * The tree head a subtree consistency proof leads to, given the subtree's hash, or null when the
 * proof is malformed (the Merkle Tree Certificates draft, appendix "subtree consistency proofs").
 */
function rootFromSubtreeProof(
  size: bigint,
  start: bigint,
  end: bigint,
  proof: readonly Uint8Array[],
  subtreeHash: Uint8Array,
): Hash | null {
  let fn = start;
  let sn = end - 1n;
  let tn = size - 1n;
  const up = () => {
    fn >>= 1n;
    sn >>= 1n;
    tn >>= 1n;
  };
  if (sn === tn) {
    while (fn !== sn) up();
  } else {
    while (fn !== sn && lsb(sn)) up();
  }
  const rest = [...proof];
  let node: Uint8Array;
  if (fn === sn) {
    node = subtreeHash;
  } else {
    const first = rest.shift();
    if (!first) return null;
    node = first;
  }
  let root: Uint8Array = node;
  for (const p of rest) {
    if (tn === 0n) return null;
    if (lsb(sn) || sn === tn) {
      if (fn < sn) node = nodeHash(p, node);
      root = nodeHash(p, root);
      while (!lsb(sn)) up();
    } else {
      root = nodeHash(root, p);
    }
    up();
  }
  if (tn !== 0n || !sameHash(node, subtreeHash)) return null;
  return root;
}

/** Does `proof` show the subtree `[start, end)` with hash `subtreeRoot` is part of the tree of `size` with head `root`? */
export function verifySubtreeConsistency(
  start: number,
  end: number,
  size: number,
  proof: readonly Uint8Array[],
  subtreeRoot: Uint8Array,
  root: Uint8Array,
): Verdict {
  if (!isSize(start) || !isSize(end) || !isSize(size)) return fail('a bound is not a whole number');
  if (end > size) return fail(`the subtree ends at ${end}, past the tree of ${size}`);
  if (start === end) {
    // The empty subtree is part of every tree; its hash is the empty tree's.
    if (proof.length > 0) return fail('the subtree is empty but the proof is not');
    return sameHash(subtreeRoot, EMPTY_ROOT) ? OK : fail('an empty subtree has the wrong hash');
  }
  if (!isValidSubtree(start, end)) return fail(`[${start}, ${end}) is not a subtree`);
  const bad = proofHashes(proof);
  if (bad) return fail(bad);
  const computed = rootFromSubtreeProof(BigInt(size), BigInt(start), BigInt(end), proof, subtreeRoot);
  if (!computed) return fail('the proof does not fit the subtree and tree size');
  return sameHash(computed, root) ? OK : fail('the proof does not lead to the root');
}

/** Does `proof` show `leaf` at `index` in the subtree `[start, end)` with hash `subtreeRoot`? */
export function verifySubtreeInclusion(
  index: number,
  start: number,
  end: number,
  leaf: Uint8Array,
  proof: readonly Uint8Array[],
  subtreeRoot: Uint8Array,
): Verdict {
  if (!isSize(index) || !isValidSubtree(start, end)) return fail(`[${start}, ${end}) is not a subtree`);
  if (index < start || index >= end) return fail(`leaf ${index} is outside [${start}, ${end})`);
  if (leaf.length !== HASH_SIZE || subtreeRoot.length !== HASH_SIZE) return fail('a hash is not 32 bytes');
  const bad = proofHashes(proof);
  if (bad) return fail(bad);
  const offset = BigInt(index - start);
  const computed = rootFromSubtreeProof(BigInt(end - start), offset, offset + 1n, proof, leaf);
  if (!computed) return fail('the proof does not fit the index and subtree');
  return sameHash(computed, subtreeRoot) ? OK : fail('the proof does not lead to the subtree hash');
}
