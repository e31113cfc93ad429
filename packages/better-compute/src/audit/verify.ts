/**
 * `audit verify`: recomputes a tenant's whole sealed log from the rows. Every leaf from its entry,
 * every checkpoint's root from the leaves, every note's signature under the pinned audit key, the
 * consistency of each checkpoint with the one before, and that no entry was deleted, moved, changed
 * or slipped in under a checkpoint that should have held it. Problems are reported, never thrown.
 * A log with no checkpoint yet is not `ok`: `nothingToVerify` says whether it is empty or unsealed.
 */
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import { parseCheckpoint } from './checkpoint.js';
import { entryFromRow, entryLeafHash, occurredAtUtc, type AuditEntryRow } from './entry.js';
import {
  consistencyProof,
  MerkleLevels,
  sameHash,
  TreeBuilder,
  verifyConsistency,
  type Hash,
} from './merkle.js';
import { parseVerifierKey, publicKeyPinOf, verifyNote } from './note.js';
import { notAncestor, openTrusted, type TrustedCheckpoint, type TrustedInput } from './trusted.js';

type AuditProblemKind =
  | 'entry_deleted'
  | 'entry_modified'
  | 'entry_moved'
  | 'entry_inserted'
  | 'leaf_missing'
  | 'root_mismatch'
  | 'checkpoint_beyond_log'
  | 'checkpoint_missing'
  | 'note_malformed'
  | 'note_mismatch'
  | 'unknown_signer'
  | 'bad_signature'
  | 'inconsistent'
  | 'not_an_ancestor';

interface AuditProblem {
  kind: AuditProblemKind;
  /** The tree size of the checkpoint concerned. */
  checkpoint?: number;
  entryId?: string;
  message: string;
}

export interface AuditVerifyReport {
  /** True only when at least one checkpoint was checked and nothing was wrong. */
  ok: boolean;
  /**
   * Why nothing was checked, when no checkpoint seals the log: `empty`, the tenant has no audit
   * entry at all; `unsealed`, its entries wait for their first checkpoint. Null once one was checked.
   */
  nothingToVerify: 'empty' | 'unsealed' | null;
  tenant: string;
  checkpoints: number;
  entries: number;
  unsealed: number;
  pin: string;
  problems: AuditProblem[];
  /** With `--trusted`: each kept checkpoint, and whether the log still extends it. */
  trusted?: { size: number; rootHash: string; ancestor: boolean; signatureChecked: boolean }[];
}

/** Checkpoints a reader kept, to check the log still extends (trusted.ts). */
export interface TrustedOption {
  inputs: readonly TrustedInput[];
  /** The file they came from, for messages. */
  file: string;
}

type EntryRow = AuditEntryRow & { leaf_index: string | null; tx_id: string; below: boolean };

export async function verifyAuditLog(
  db: Kysely<ComputeTables>,
  options: { tenantId: string; pin: string; trusted?: TrustedOption | undefined },
): Promise<AuditVerifyReport> {
  const { tenantId, pin } = options;
  const problems: AuditProblem[] = [];
  const checkpoints = await db
    .selectFrom('compute.audit_checkpoints')
    .select(['tree_size', 'root_hash', 'note', 'signer', sql<string>`sealed_below::text`.as('sealed_below')])
    .where('tenant_id', '=', tenantId)
    .orderBy('tree_size')
    .execute();
  const leaves = await db
    .selectFrom('compute.audit_leaves')
    .select(['leaf_index', 'entry_id', 'leaf_hash'])
    .where('tenant_id', '=', tenantId)
    .orderBy('leaf_index')
    .execute();
  const sealedBelow = checkpoints.at(-1)?.sealed_below ?? '0';
  // The tenant's entries, and any other row a leaf names (an entry moved to another tenant).
  const entryRows = await sql<EntryRow>`
    select id, tenant_id, actor, actor_kind, action, method, resource_type, resource_id, outcome,
      error_code, request_id, ${occurredAtUtc} as occurred_at_utc, leaf_index::text as leaf_index,
      tx_id::text as tx_id, tx_id < ${sealedBelow}::xid8 as below
    from compute.audit_events
    where tenant_id = ${tenantId}
      or id in (select entry_id from compute.audit_leaves where tenant_id = ${tenantId})`.execute(db);
  const byId = new Map(entryRows.rows.map((row) => [row.id, row]));

  // Every leaf, from its entry as it is now.
  const hashes: Hash[] = [];
  const placed = new Map<string, number>();
  for (const [position, leaf] of leaves.entries()) {
    const index = Number(leaf.leaf_index);
    if (index !== position) {
      problems.push({
        kind: 'leaf_missing',
        message: `leaf ${position} is missing from the tree's leaves (the next is ${index})`,
      });
      break;
    }
    const row = byId.get(leaf.entry_id);
    const stored = new Uint8Array(leaf.leaf_hash);
    if (!row) {
      problems.push({
        kind: 'entry_deleted',
        entryId: leaf.entry_id,
        message: `entry ${leaf.entry_id} (leaf ${index}) is sealed but no longer in the audit log`,
      });
      hashes.push(stored);
      continue;
    }
    const hash = entryLeafHash(entryFromRow(row));
    hashes.push(hash);
    if (placed.has(row.id)) {
      problems.push({
        kind: 'entry_inserted',
        entryId: row.id,
        message: `entry ${row.id} is sealed twice, at leaves ${placed.get(row.id)} and ${index}`,
      });
    }
    placed.set(row.id, index);
    if (!sameHash(hash, stored)) {
      problems.push({
        kind: 'entry_modified',
        entryId: row.id,
        message: `entry ${row.id} (leaf ${index}) changed since it was sealed`,
      });
    }
    if (row.leaf_index !== String(index)) {
      problems.push({
        kind: 'entry_moved',
        entryId: row.id,
        message: `entry ${row.id} was sealed at leaf ${index} but now says ${row.leaf_index ?? 'unsealed'}`,
      });
    }
  }
  for (const row of entryRows.rows) {
    if (row.tenant_id !== tenantId || placed.has(row.id)) continue;
    if (row.leaf_index !== null) {
      problems.push({
        kind: 'entry_inserted',
        entryId: row.id,
        message: `entry ${row.id} claims leaf ${row.leaf_index}, which holds another entry`,
      });
    } else if (row.below) {
      problems.push({
        kind: 'entry_inserted',
        entryId: row.id,
        message: `entry ${row.id} is older than the last checkpoint's snapshot but was never sealed: it was added afterwards`,
      });
    }
  }

  // Every checkpoint: its root from the leaves, its note, its signature, its consistency.
  const tree = new TreeBuilder();
  const levels = new MerkleLevels(hashes);
  let previous: { size: number; root: Uint8Array } | undefined;
  for (const checkpoint of checkpoints) {
    const size = Number(checkpoint.tree_size);
    const storedRoot = new Uint8Array(checkpoint.root_hash);
    if (size > hashes.length) {
      problems.push({
        kind: 'checkpoint_beyond_log',
        checkpoint: size,
        message: `checkpoint ${size} covers more entries than the log's ${hashes.length} leaves`,
      });
      continue;
    }
    while (tree.size < size) tree.append(hashes[tree.size]!);
    if (!sameHash(tree.root(), storedRoot)) {
      problems.push({
        kind: 'root_mismatch',
        checkpoint: size,
        message: `the entries no longer hash to checkpoint ${size}'s root`,
      });
    }
    problems.push(...checkNote(checkpoint, tenantId, size, storedRoot, pin));
    if (previous && previous.size > 0) {
      const proof = consistencyProof(levels, previous.size, size);
      const verdict = verifyConsistency(previous.size, size, proof, previous.root, storedRoot);
      if (!verdict.ok) {
        problems.push({
          kind: 'inconsistent',
          checkpoint: size,
          message: `checkpoint ${size} does not extend checkpoint ${previous.size}: ${verdict.reason}`,
        });
      }
    }
    previous = { size, root: storedRoot };
  }
  // Leaves are written in the transaction of the checkpoint that covers them (seal.ts), so leaves
  // past the last checkpoint mean checkpoints were removed: a log stripped of all of them must not
  // pass for one that was never sealed.
  const coveredTo = checkpoints.length ? Number(checkpoints.at(-1)!.tree_size) : 0;
  if (hashes.length > coveredTo) {
    problems.push({
      kind: 'checkpoint_missing',
      message: `leaves ${coveredTo} to ${hashes.length - 1} are in no checkpoint: ${checkpoints.length ? `the checkpoints after size ${coveredTo} were removed` : 'every checkpoint was removed'}`,
    });
  }
  // Kept checkpoints: each must be a prefix of the latest checkpoint the leaves still reach, as the
  // entries are now. Their notes are checked under the keys that signed this log's rows (pin-checked).
  let trusted: AuditVerifyReport['trusted'];
  if (options.trusted) {
    const opened = openTrusted(options.trusted.inputs, {
      tenantId,
      pin,
      keys: [...new Set(checkpoints.map((c) => c.signer))],
      file: options.trusted.file,
    });
    const latest = checkpoints.filter((c) => Number(c.tree_size) <= hashes.length).at(-1);
    const current = latest
      ? { size: Number(latest.tree_size), root: new Uint8Array(latest.root_hash) }
      : { size: 0, root: new Uint8Array(32) };
    trusted = opened.map((kept) => {
      const problem = checkAncestor(kept, current, levels);
      if (problem) problems.push(problem);
      return {
        size: kept.size,
        rootHash: kept.rootHash,
        ancestor: problem === null,
        signatureChecked: kept.signatureChecked,
      };
    });
  }
  const unsealed = entryRows.rows.filter(
    (row) => row.tenant_id === tenantId && row.leaf_index === null,
  ).length;
  // A log with no checkpoint proves nothing: it must not read as a verified one (issue 31). Any
  // sealed leaf without a checkpoint is still looked at above, so problems are reported either way.
  const nothingToVerify =
    checkpoints.length > 0 ? null : leaves.length === 0 && entryRows.rows.length === 0 ? 'empty' : 'unsealed';
  return {
    ok: problems.length === 0 && nothingToVerify === null,
    nothingToVerify,
    tenant: tenantId,
    checkpoints: checkpoints.length,
    entries: leaves.length,
    unsealed,
    pin,
    problems,
    ...(trusted ? { trusted } : {}),
  };
}

function checkAncestor(
  kept: TrustedCheckpoint,
  current: { size: number; root: Uint8Array },
  levels: MerkleLevels,
): AuditProblem | null {
  const proof =
    kept.size > 0 && kept.size < current.size ? consistencyProof(levels, kept.size, current.size) : [];
  const reason = notAncestor(kept, current, proof);
  return reason
    ? {
        kind: 'not_an_ancestor',
        checkpoint: kept.size,
        message: `the kept checkpoint of size ${kept.size} and root ${kept.rootHex} (hex) is no longer an ancestor of the log: ${reason}`,
      }
    : null;
}

function checkNote(
  checkpoint: { note: string; signer: string },
  tenantId: string,
  size: number,
  root: Uint8Array,
  pin: string,
): AuditProblem[] {
  const signer = parseVerifierKey(checkpoint.signer);
  if (!signer) {
    return [{ kind: 'unknown_signer', checkpoint: size, message: `checkpoint ${size} names no valid key` }];
  }
  if (publicKeyPinOf(signer.publicKey) !== pin) {
    return [
      {
        kind: 'unknown_signer',
        checkpoint: size,
        message: `checkpoint ${size} was signed by a key whose pin is not ${pin}`,
      },
    ];
  }
  const verdict = verifyNote(checkpoint.note, signer.name, signer.publicKey);
  if (!verdict.ok) {
    return [
      {
        kind: 'bad_signature',
        checkpoint: size,
        message: `checkpoint ${size}'s note does not verify: ${verdict.reason}`,
      },
    ];
  }
  const body = parseCheckpoint(verdict.text);
  if ('error' in body) {
    return [{ kind: 'note_malformed', checkpoint: size, message: `checkpoint ${size}: ${body.error}` }];
  }
  const problems: AuditProblem[] = [];
  if (body.origin !== signer.name || !body.origin.endsWith(`/audit/${tenantId}`)) {
    problems.push({
      kind: 'note_mismatch',
      checkpoint: size,
      message: `checkpoint ${size}'s origin "${body.origin}" is not this tenant's log`,
    });
  }
  if (body.size !== size || !sameHash(body.root, root)) {
    problems.push({
      kind: 'note_mismatch',
      checkpoint: size,
      message: `checkpoint ${size}'s signed note says size ${body.size} and another root than its row`,
    });
  }
  return problems;
}
