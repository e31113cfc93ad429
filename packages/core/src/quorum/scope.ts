/**
 * A batch's scope: its leaves, each a versioned, length-prefixed encoding of one destructive
 * command, and their RFC 6962 tree (the audit log's hashing, shared through core). The scope file is
 * what `batch show --scope-out` writes and `batch sign` reads: the batch as the server describes
 * it, which the signer checks against its own recomputation before anything is signed.
 */
import { ComputeError } from '../errors.js';
import { isId } from '../ids.js';
import { HASH_SIZE, type Hash, leafHash, TreeBuilder } from '../merkle.js';
import { ByteWriter, fromHex, isWellFormedText, parseInstant, toHex } from './bytes.js';
import { destructiveKind, isUnbound, leafProblem, type ScopeLeaf } from './kinds.js';

/** The first byte of every leaf: a new encoding gets a new version, so old roots never collide. */
export const LEAF_VERSION = 1;

/** The most leaves a batch may hold: a fleet-wide reimage, with room to spare. */
export const MAX_SCOPE_LEAVES = 100_000;

/**
 * The leaf's bytes: version, subject, kind, then the payload: 0x00 when unbound, else 0x01, the
 * kind's field count and each field in the kind's order (its name, then 0x00 when absent or 0x01
 * and the value). Strings are u32-length-prefixed UTF-8. The leaf must already be checked.
 */
export function leafBytes(leaf: ScopeLeaf): Uint8Array {
  const entry = destructiveKind(leaf.kind);
  if (!entry) throw new RangeError(`${leaf.kind} is not a destructive command kind`);
  const out = new ByteWriter().u8(LEAF_VERSION).text(leaf.subject).text(leaf.kind);
  if (leaf.payload === null) return out.u8(0).finish();
  out.u8(1).u32(entry.fields.length);
  for (const field of entry.fields) {
    const value = leaf.payload[field.name];
    out.text(field.name);
    if (value === undefined) out.u8(0);
    else out.u8(1).text(value);
  }
  return out.finish();
}

/** The RFC 6962 leaf hash of a scope leaf. */
export const scopeLeafHash = (leaf: ScopeLeaf): Hash => leafHash(leafBytes(leaf));

export interface ScopeTree {
  /** The tree head over the leaves in order. */
  root: Hash;
  /** The leaf count. */
  size: number;
}

/** The root and size of a scope's leaves, as `batch sign` recomputes them. */
export function scopeTree(leaves: readonly ScopeLeaf[]): ScopeTree {
  const tree = new TreeBuilder();
  for (const leaf of leaves) tree.append(scopeLeafHash(leaf));
  return { root: tree.root(), size: tree.size };
}

/** Checks leaves from outside; INVALID_ARGUMENT naming the first bad one. */
export function parseLeaves(value: unknown, where = 'the scope'): ScopeLeaf[] {
  if (!Array.isArray(value)) throw invalid(`${where} has no list of leaves`);
  if (value.length === 0) throw invalid(`${where} has no leaves`);
  if (value.length > MAX_SCOPE_LEAVES) throw invalid(`${where} has more than ${MAX_SCOPE_LEAVES} leaves`);
  return value.map((leaf, index) => {
    const problem = leafProblem(leaf);
    if (problem) throw invalid(`leaf ${index} of ${where}: ${problem}`);
    const { subject, kind, payload } = leaf as ScopeLeaf;
    return { subject, kind, payload: payload === null ? null : { ...payload } };
  });
}

/** The scope file's format tag. */
export const SCOPE_FORMAT = 'better-compute.batch-scope/v1';

/** A batch as `batch show --scope-out` writes it. Instants are `toISOString()` text, roots lowercase hex. */
export interface ScopeFile {
  format: typeof SCOPE_FORMAT;
  batchId: string;
  trustDomain: string;
  createdAt: string;
  notAfter: string;
  reason: string;
  /** Who proposed it: a person's identity, or the agent warning line (see the guide's `proposedBy`). */
  proposedBy?: string;
  leaves: ScopeLeaf[];
  root: string;
  size: number;
}

/** What an approval signs about a batch. */
export interface BatchStatement {
  batchId: string;
  trustDomain: string;
  root: Hash;
  size: number;
  /** Milliseconds since the epoch: the end of the approval window. */
  notAfter: number;
}

const TRUST_DOMAIN = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

export const isTrustDomain = (value: unknown): value is string =>
  typeof value === 'string' && value.length <= 253 && TRUST_DOMAIN.test(value);

function invalid(message: string): ComputeError {
  return new ComputeError('INVALID_ARGUMENT', message, {
    hint: 'Give the file "better-compute batch show --scope-out" wrote, unchanged.',
  });
}

/** The batch fields every statement needs, checked; INVALID_ARGUMENT naming the first bad one. */
export function parseStatementFields(value: Record<string, unknown>): BatchStatement {
  if (!isId('batch', value.batchId)) throw invalid('"batchId" is not a batch id');
  if (!isTrustDomain(value.trustDomain)) throw invalid('"trustDomain" is not a DNS-style name');
  const root = fromHex(value.root, HASH_SIZE);
  if (!root) throw invalid('"root" is not 64 lowercase hex digits');
  if (!Number.isSafeInteger(value.size) || (value.size as number) < 1)
    throw invalid('"size" is not a positive whole number');
  const notAfter = parseInstant(value.notAfter);
  if (notAfter === null) throw invalid('"notAfter" is not an instant such as 2026-09-25T18:00:00.000Z');
  return {
    batchId: value.batchId,
    trustDomain: value.trustDomain,
    root,
    size: value.size as number,
    notAfter,
  };
}

/**
 * Reads a scope file and recomputes its root from its leaves: SCOPE_MISMATCH when the root or size
 * the file claims is not what its leaves give, so nobody signs a root they did not see the leaves of.
 */
export function readScopeFile(document: unknown): {
  file: ScopeFile;
  statement: BatchStatement;
  createdAt: number;
} {
  if (typeof document !== 'object' || document === null || Array.isArray(document))
    throw invalid('the scope file is not a JSON object');
  const value = document as Record<string, unknown>;
  if (value.format !== SCOPE_FORMAT) throw invalid(`the scope file is not ${SCOPE_FORMAT}`);
  const statement = parseStatementFields(value);
  const createdAt = parseInstant(value.createdAt);
  if (createdAt === null) throw invalid('"createdAt" is not an instant such as 2026-09-25T18:00:00.000Z');
  if (!isWellFormedText(value.reason, 2000)) throw invalid('"reason" is not text of 1 to 2000 characters');
  if (value.proposedBy !== undefined && !isWellFormedText(value.proposedBy, 500))
    throw invalid('"proposedBy" is not text of 1 to 500 characters');
  const leaves = parseLeaves(value.leaves);
  const tree = scopeTree(leaves);
  if (tree.size !== statement.size || toHex(tree.root) !== value.root) {
    throw new ComputeError(
      'SCOPE_MISMATCH',
      `the scope's ${tree.size} leaves give root ${toHex(tree.root)}, not the ${statement.size}-leaf root ${String(value.root)} it claims`,
      {
        hint: 'Do not sign it. Fetch the scope again with "better-compute batch show --scope-out" and report the batch if it still differs.',
      },
    );
  }
  const file: ScopeFile = {
    format: SCOPE_FORMAT,
    batchId: statement.batchId,
    trustDomain: statement.trustDomain,
    createdAt: value.createdAt as string,
    notAfter: value.notAfter as string,
    reason: value.reason,
    ...(value.proposedBy === undefined ? {} : { proposedBy: value.proposedBy as string }),
    leaves,
    root: value.root as string,
    size: statement.size,
  };
  return { file, statement, createdAt };
}

/** The leaves that admit any payload of their kind, by index. */
export const unboundLeaves = (leaves: readonly ScopeLeaf[]): number[] =>
  leaves.flatMap((leaf, index) => (isUnbound(leaf) ? [index] : []));
