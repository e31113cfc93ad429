/**
 * What the gateway sends beside a batch member's command: the batch statement, the leaf's index and
 * inclusion proof (stored with the member, so the tree is never rebuilt), whether the leaf is
 * unbound, and the approvals. The daemon checks all of it against the approver set it pinned.
 */
import { type CommandQuorum, commandQuorum, fromHex } from '@better-compute/core/quorum';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import type { CommandRow } from '../commands/tables.js';
import { batchesDb } from './tables.js';
import { approvalsOf, statementOf } from './views.js';

/** The `quorum` of each member among `rows`, by command id; rows of no batch have none. */
export async function quorumAttachments(
  db: Kysely<ComputeTables>,
  rows: readonly Pick<CommandRow, 'id' | 'batch_id' | 'batch_index' | 'batch_proof'>[],
): Promise<Map<string, CommandQuorum>> {
  const attached = new Map<string, CommandQuorum>();
  const batchIds = [...new Set(rows.flatMap((row) => (row.batch_id ? [row.batch_id] : [])))];
  if (batchIds.length === 0) return attached;
  const bdb = batchesDb(db);
  const [batches, approvals, unbound] = await Promise.all([
    bdb
      .selectFrom('compute.command_batches')
      .select(['id', 'trust_domain', 'root', 'size', 'not_after'])
      .where('id', 'in', batchIds)
      .execute(),
    approvalsOf(bdb, batchIds),
    bdb
      .selectFrom('compute.command_batch_leaves')
      .select(['batch_id', 'idx'])
      .where('batch_id', 'in', batchIds)
      .where('payload', 'is', null)
      .execute(),
  ]);
  const byId = new Map(batches.map((batch) => [batch.id, batch]));
  const unboundLeaves = new Set(unbound.map((leaf) => `${leaf.batch_id}:${leaf.idx}`));
  for (const row of rows) {
    const batch = row.batch_id ? byId.get(row.batch_id) : undefined;
    if (!batch || row.batch_index === null || !row.batch_proof) continue;
    attached.set(
      row.id,
      commandQuorum(
        statementOf(batch),
        {
          index: row.batch_index,
          proof: row.batch_proof.map((hash) => fromHex(hash, 32)!),
          unbound: unboundLeaves.has(`${batch.id}:${row.batch_index}`),
        },
        approvals.filter((approval) => approval.batch_id === batch.id),
      ),
    );
  }
  return attached;
}
