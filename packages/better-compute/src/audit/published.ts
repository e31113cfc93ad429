/**
 * What the deployment publishes of each tenant's audit log, for parties outside its database: the
 * latest signed checkpoint (`audit.checkpoint`, and the `audit.checkpoint` event each seal writes)
 * and consistency proofs between checkpoints (`audit.consistency`). Both are public methods: a
 * checkpoint tells the log's size and root hash and nothing of its entries, a proof only hashes of
 * subtrees. An unknown tenant and a tenant with no checkpoint get the same answer, so the method
 * does not tell which tenants exist.
 */
import { ComputeError } from '@better-compute/core';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import { consistencyProof, MerkleLevels } from './merkle.js';

/** A checkpoint as `audit.checkpoint` answers it and the `audit.checkpoint` event carries it. */
export interface PublishedCheckpoint {
  tenantId: string;
  origin: string;
  size: number;
  rootHash: string;
  note: string;
  signer: string;
}

export function publishedCheckpoint(
  tenantId: string,
  row: { tree_size: string | number; root_hash: Buffer | Uint8Array; note: string; signer: string },
): PublishedCheckpoint {
  return {
    tenantId,
    // The note's first line; the origin is also the signer's key name.
    origin: row.note.slice(0, row.note.indexOf('\n')),
    size: Number(row.tree_size),
    rootHash: Buffer.from(row.root_hash).toString('base64'),
    note: row.note,
    signer: row.signer,
  };
}

function noCheckpoint(tenantId: string, size?: number): ComputeError {
  return new ComputeError(
    'NOT_FOUND',
    size === undefined
      ? `tenant ${tenantId} has no signed audit checkpoint`
      : `tenant ${tenantId} has no signed audit checkpoint of size ${size}`,
    {
      hint:
        size === undefined
          ? 'A checkpoint is signed once the tenant has audited calls and the hourly seal ran.'
          : 'Give the size of a published checkpoint (the second line of its note), or leave toSize out for the latest.',
      details: { tenantId },
    },
  );
}

async function checkpointRow(db: Kysely<ComputeTables>, tenantId: string, size?: number) {
  let query = db
    .selectFrom('compute.audit_checkpoints')
    .select(['tree_size', 'root_hash', 'note', 'signer'])
    .where('tenant_id', '=', tenantId);
  if (size !== undefined) query = query.where('tree_size', '=', size);
  return query.orderBy('tree_size', 'desc').limit(1).executeTakeFirst();
}

/** The latest checkpoint of a tenant's log; NOT_FOUND when it has none. */
export async function latestCheckpoint(
  db: Kysely<ComputeTables>,
  tenantId: string,
): Promise<PublishedCheckpoint> {
  const row = await checkpointRow(db, tenantId);
  if (!row) throw noCheckpoint(tenantId);
  return publishedCheckpoint(tenantId, row);
}

/**
 * The proof that the tree of `fromSize` leaves is a prefix of the checkpoint of `toSize` (the latest
 * when absent), from the stored leaf hashes: a log whose leaves were changed gives a proof that does
 * not verify against a checkpoint kept before, which is the point. `fromSize` larger than the
 * checkpoint is INVALID_ARGUMENT: no proof exists, and the caller must treat the log as shortened.
 */
export async function consistencyFrom(
  db: Kysely<ComputeTables>,
  input: { tenantId: string; fromSize: number; toSize?: number | undefined },
): Promise<{ tenantId: string; fromSize: number; checkpoint: PublishedCheckpoint; proof: string[] }> {
  const { tenantId, fromSize } = input;
  // One snapshot for the checkpoint and its leaves: a seal between two reads cannot mix them.
  return db.transaction().execute(async (trx) => {
    const row = await checkpointRow(trx, tenantId, input.toSize);
    if (!row) throw noCheckpoint(tenantId, input.toSize);
    const checkpoint = publishedCheckpoint(tenantId, row);
    if (fromSize > checkpoint.size) {
      throw new ComputeError(
        'INVALID_ARGUMENT',
        `fromSize ${fromSize} is larger than tenant ${tenantId}'s checkpoint of size ${checkpoint.size}`,
        {
          hint: 'A checkpoint you kept that is larger than the log is now means the log was shortened: keep it as evidence.',
          details: { field: 'fromSize', size: checkpoint.size },
        },
      );
    }
    if (fromSize === checkpoint.size) return { tenantId, fromSize, checkpoint, proof: [] };
    const leaves = await trx
      .selectFrom('compute.audit_leaves')
      .select('leaf_hash')
      .where('tenant_id', '=', tenantId)
      .where('leaf_index', '<', checkpoint.size)
      .orderBy('leaf_index')
      .execute();
    if (leaves.length !== checkpoint.size) {
      throw new ComputeError(
        // Not AUDIT_TAMPERED: that code is the CLI's, and an API answer must not be a 5xx.
        'INVALID_STATE',
        `tenant ${tenantId}'s checkpoint of size ${checkpoint.size} covers ${leaves.length} stored leaves: no proof can be made`,
        { hint: "The deployment's operator should verify this tenant's audit log." },
      );
    }
    const levels = new MerkleLevels(leaves.map((leaf) => new Uint8Array(leaf.leaf_hash)));
    const proof = consistencyProof(levels, fromSize, checkpoint.size).map((hash) =>
      Buffer.from(hash).toString('base64'),
    );
    return { tenantId, fromSize, checkpoint, proof };
  });
}
