/**
 * Sealing the audit log: per tenant, the entries written since the tenant's last checkpoint are
 * appended to its Merkle tree, each entry keeps its leaf index, and a checkpoint (C2SP
 * tlog-checkpoint) of the new tree is signed with the audit key as a C2SP signed note.
 *
 * Only entries of transactions below the oldest one still running (the snapshot's xmin) are taken:
 * a transaction that commits late with an older id is sealed by the next checkpoint, never
 * skipped, and the checkpoint records that xmin so `verify` can tell an entry slipped in later.
 * Within a seal, entries go in (occurred_at, id) order; once sealed, an entry's place never moves.
 */
import type { KeyObject } from 'node:crypto';
import { retryTransient } from '@better-compute/db';
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import { auditOrigin, formatCheckpoint } from './checkpoint.js';
import { entryFromRow, entryLeafHash, occurredAtUtc, type AuditEntryRow } from './entry.js';
import { TreeBuilder } from './merkle.js';
import { signNote, verifierKey } from './note.js';
import { SETTLED_HORIZON } from '../db/settled.js';
import { writeEvents } from '../db/unit-of-work.js';
import type { CatalogEventDraft } from '@better-compute/events';
import { publishedCheckpoint } from './published.js';

/** The audit key's two halves, the private one unsealed. */
export interface AuditSigningKey {
  privateKey: KeyObject;
  publicKey: KeyObject;
}

export interface SealOptions {
  key: AuditSigningKey;
  /** The deployment's name in checkpoint origins: `<name>/audit/<tenant>`. */
  deployment: string;
  /** Seal this tenant only; every tenant with new entries otherwise. */
  tenantId?: string | undefined;
  /** The most entries one checkpoint takes; more make several checkpoints. */
  batch?: number;
}

export interface SealedCheckpoint {
  tenantId: string;
  origin: string;
  treeSize: number;
  added: number;
  rootHash: string;
}

const DEFAULT_BATCH = 10_000;

/** Seals every tenant's new entries (or one tenant's); answers the checkpoints it signed. */
export async function sealAuditLog(
  db: Kysely<ComputeTables>,
  options: SealOptions,
): Promise<{ checkpoints: SealedCheckpoint[] }> {
  const tenants = options.tenantId ? [options.tenantId] : await tenantsToSeal(db);
  const checkpoints: SealedCheckpoint[] = [];
  for (const tenantId of tenants) {
    for (;;) {
      const sealed = await retryTransient(() =>
        db.transaction().execute((trx) => sealTenant(trx, tenantId, options)),
      );
      if (!sealed) break;
      checkpoints.push(sealed.checkpoint);
      if (!sealed.more) break;
    }
  }
  return { checkpoints };
}

async function tenantsToSeal(db: Kysely<ComputeTables>): Promise<string[]> {
  // Raw SQL: Kysely has no builder for snapshot functions.
  const result = await sql<{ tenant_id: string }>`
    select distinct tenant_id from compute.audit_events
    where leaf_index is null and tx_id < ${SETTLED_HORIZON}
    order by tenant_id`.execute(db);
  return result.rows.map((row) => row.tenant_id);
}

async function sealTenant(
  trx: Kysely<ComputeTables>,
  tenantId: string,
  options: SealOptions,
): Promise<{ checkpoint: SealedCheckpoint; more: boolean } | null> {
  const batch = options.batch ?? DEFAULT_BATCH;
  // One sealer per tenant at a time, whatever replica or command runs it.
  await sql`select pg_advisory_xact_lock(hashtextextended(${`compute.audit.seal:${tenantId}`}, 0))`.execute(
    trx,
  );
  const last = await trx
    .selectFrom('compute.audit_checkpoints')
    .select(['tree_size', 'frontier', sql<string>`sealed_below::text`.as('sealed_below')])
    .where('tenant_id', '=', tenantId)
    .orderBy('tree_size', 'desc')
    .limit(1)
    .executeTakeFirst();
  // The rows and the xmin come from one statement, so they are of one snapshot.
  const rows = await sql<AuditEntryRow & { xmin: string }>`
    select id, tenant_id, actor, actor_kind, action, method, resource_type, resource_id, outcome,
      error_code, request_id, ${occurredAtUtc} as occurred_at_utc,
      ${SETTLED_HORIZON}::text as xmin
    from compute.audit_events
    where tenant_id = ${tenantId} and leaf_index is null
      and tx_id < ${SETTLED_HORIZON}
    order by occurred_at, id
    limit ${batch}`.execute(trx);
  if (rows.rows.length === 0) return null;
  const more = rows.rows.length === batch;

  const previousSize = last ? Number(last.tree_size) : 0;
  const tree = last
    ? TreeBuilder.resume(
        previousSize,
        last.frontier.map((hash) => new Uint8Array(Buffer.from(hash, 'base64'))),
      )
    : new TreeBuilder();
  const hashes = rows.rows.map((row) => entryLeafHash(entryFromRow(row)));
  for (const hash of hashes) tree.append(hash);
  const root = tree.root();
  const origin = auditOrigin(options.deployment, tenantId);
  const note = signNote(
    formatCheckpoint({ origin, size: tree.size, root }),
    origin,
    options.key.privateKey,
    options.key.publicKey,
  );
  const ids = rows.rows.map((row) => row.id);
  const indexes = ids.map((_, i) => String(previousSize + i));
  const hex = hashes.map((hash) => Buffer.from(hash).toString('hex'));
  // Raw SQL: one statement per table for the whole batch, through unnest.
  await sql`
    update compute.audit_events e set leaf_index = v.leaf_index
    from (select unnest(${ids}::text[]) as id, unnest(${indexes}::bigint[]) as leaf_index) v
    where e.id = v.id`.execute(trx);
  await sql`
    insert into compute.audit_leaves (tenant_id, leaf_index, entry_id, leaf_hash)
    select ${tenantId}, v.leaf_index, v.entry_id, decode(v.leaf_hash, 'hex')
    from (select unnest(${indexes}::bigint[]) as leaf_index, unnest(${ids}::text[]) as entry_id,
      unnest(${hex}::text[]) as leaf_hash) v`.execute(trx);
  // A partial batch took every entry below the xmin; a full one may have left some behind it.
  const xmin = rows.rows[0]!.xmin;
  const sealedBelow = more ? (last?.sealed_below ?? '0') : xmin;
  await sql`
    insert into compute.audit_checkpoints
      (tenant_id, tree_size, root_hash, note, signer, frontier, sealed_below)
    values (${tenantId}, ${tree.size}, ${Buffer.from(root)}, ${note},
      ${verifierKey(origin, options.key.publicKey)},
      ${JSON.stringify(tree.frontier().map((hash) => Buffer.from(hash).toString('base64')))}::jsonb,
      greatest(${sealedBelow}::xid8, ${last?.sealed_below ?? '0'}::xid8))`.execute(trx);
  // Published in the same transaction: webhooks and event readers outside the database keep every
  // checkpoint, so a log shortened or rewritten later no longer extends what they hold.
  const published: CatalogEventDraft = {
    type: 'audit.checkpoint',
    subject: { type: 'auditLog', id: origin },
    tenantId,
    data: publishedCheckpoint(tenantId, {
      tree_size: tree.size,
      root_hash: root,
      note,
      signer: verifierKey(origin, options.key.publicKey),
    }),
  };
  await writeEvents(trx, [published], { tenantId, actor: null, requestId: `audit_seal_${tree.size}` });
  return {
    checkpoint: {
      tenantId,
      origin,
      treeSize: tree.size,
      added: rows.rows.length,
      rootHash: Buffer.from(root).toString('base64'),
    },
    more,
  };
}
