/**
 * `audit prove`: the proof that an entry is in its tenant's log, checkable offline by anyone with
 * the audit key's pin (`check-proof.ts`): the entry, its leaf index, the inclusion proof against
 * the tenant's latest checkpoint, that checkpoint's signed note and the verifier key that signed it;
 * with `consistencyFrom`, also the proof that an earlier checkpoint is a prefix of it.
 */
import { ComputeError } from '@better-compute/core';
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import { entryFromRow, entryLeafHash, occurredAtUtc, type AuditEntry, type AuditEntryRow } from './entry.js';
import { consistencyProof, inclusionProof, MerkleLevels, sameHash, type Hash } from './merkle.js';

export const PROOF_FORMAT = 'better-compute/audit-proof/v1';

export interface AuditProof {
  format: typeof PROOF_FORMAT;
  entry: AuditEntry;
  leafIndex: number;
  treeSize: number;
  /** The inclusion proof, base64 hashes from the leaf up. */
  inclusion: string[];
  /** The checkpoint as a C2SP signed note. */
  checkpoint: string;
  /** The verifier key (c2sp.org/signed-note) whose signature the note carries. */
  signer: string;
  consistency?: {
    fromSize: number;
    /** The earlier checkpoint's signed note. */
    checkpoint: string;
    signer: string;
    proof: string[];
  };
  /**
   * Consistency proofs from the sizes of checkpoints a reader kept (`audit prove --trusted`) to
   * this checkpoint, for `audit check-proof --trusted`. A kept size larger than the tree has none.
   */
  ancestors?: { size: number; proof: string[] }[];
}

const b64 = (hash: Hash) => Buffer.from(hash).toString('base64');

export async function proveEntry(
  db: Kysely<ComputeTables>,
  options: {
    tenantId: string;
    entryId: string;
    consistencyFrom?: number | undefined;
    trustedSizes?: readonly number[] | undefined;
  },
): Promise<AuditProof> {
  const { tenantId, entryId } = options;
  const row = (
    await sql<AuditEntryRow & { leaf_index: string | null }>`
      select id, tenant_id, actor, actor_kind, action, method, resource_type, resource_id, outcome,
        error_code, request_id, ${occurredAtUtc} as occurred_at_utc, leaf_index::text as leaf_index
      from compute.audit_events where id = ${entryId} and tenant_id = ${tenantId}`.execute(db)
  ).rows[0];
  if (!row) {
    throw new ComputeError('NOT_FOUND', `no audit entry ${entryId} in tenant ${tenantId}`, {
      hint: 'Check the id and --tenant; entries are listed by the audit log of the tenant that made the call.',
    });
  }
  if (row.leaf_index === null) {
    throw new ComputeError('INVALID_STATE', `audit entry ${entryId} is not sealed in a checkpoint yet`, {
      hint: 'Run `better-compute audit checkpoint --tenant ' + tenantId + '` (the hourly job does it too).',
    });
  }
  const leafIndex = Number(row.leaf_index);
  const checkpoint = await db
    .selectFrom('compute.audit_checkpoints')
    .select(['tree_size', 'note', 'signer'])
    .where('tenant_id', '=', tenantId)
    .orderBy('tree_size', 'desc')
    .limit(1)
    .executeTakeFirst();
  const treeSize = Number(checkpoint?.tree_size ?? 0);
  if (!checkpoint || treeSize <= leafIndex) {
    throw new ComputeError(
      'AUDIT_TAMPERED',
      `entry ${entryId} says leaf ${leafIndex}, past every checkpoint`,
      {
        hint: `Run \`better-compute audit verify --tenant ${tenantId}\`.`,
      },
    );
  }
  const leaves = (
    await db
      .selectFrom('compute.audit_leaves')
      .select(['leaf_index', 'entry_id', 'leaf_hash'])
      .where('tenant_id', '=', tenantId)
      .where('leaf_index', '<', treeSize)
      .orderBy('leaf_index')
      .execute()
  ).map((leaf) => ({ ...leaf, leaf_hash: new Uint8Array(leaf.leaf_hash) }));
  const entry = entryFromRow(row);
  const mine = leaves[leafIndex];
  if (
    leaves.length !== treeSize ||
    !mine ||
    mine.entry_id !== entryId ||
    !sameHash(mine.leaf_hash, entryLeafHash(entry))
  ) {
    throw new ComputeError('AUDIT_TAMPERED', `entry ${entryId} does not match its sealed leaf ${leafIndex}`, {
      hint: `Run \`better-compute audit verify --tenant ${tenantId}\` to see what changed.`,
    });
  }
  const hashes = new MerkleLevels(leaves.map((leaf) => leaf.leaf_hash));
  const proof: AuditProof = {
    format: PROOF_FORMAT,
    entry,
    leafIndex,
    treeSize,
    inclusion: inclusionProof(hashes, leafIndex, treeSize).map(b64),
    checkpoint: checkpoint.note,
    signer: checkpoint.signer,
  };
  if (options.consistencyFrom !== undefined) {
    const fromSize = options.consistencyFrom;
    const earlier = await db
      .selectFrom('compute.audit_checkpoints')
      .select(['note', 'signer'])
      .where('tenant_id', '=', tenantId)
      .where('tree_size', '=', fromSize)
      .executeTakeFirst();
    if (!earlier || fromSize > treeSize) {
      throw new ComputeError('NOT_FOUND', `tenant ${tenantId} has no checkpoint of size ${fromSize}`, {
        hint: 'Give the tree size of an earlier checkpoint (the second line of its note).',
      });
    }
    proof.consistency = {
      fromSize,
      checkpoint: earlier.note,
      signer: earlier.signer,
      proof: fromSize === treeSize ? [] : consistencyProof(hashes, fromSize, treeSize).map(b64),
    };
  }
  if (options.trustedSizes) {
    proof.ancestors = [...new Set(options.trustedSizes)]
      .filter((size) => size > 0 && size <= treeSize)
      .map((size) => ({
        size,
        proof: size === treeSize ? [] : consistencyProof(hashes, size, treeSize).map(b64),
      }));
  }
  return proof;
}
