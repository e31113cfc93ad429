/** `inventory.get`, `inventory.history` and `inventory.diff`: what nodes reported, and what changed. */
import { ComputeError } from '@better-compute/core';
import type { CallContext } from '../define-module.js';
import { iso, notFound } from './common.js';
import { type StoredInventory, fleetDb } from './tables.js';

export async function getInventory(ctx: CallContext<{ nodeId: string }>) {
  const db = fleetDb(ctx.db);
  const node = await db
    .selectFrom('compute.nodes')
    .select(['id', 'inventory_revision', 'reported_revision'])
    .where('id', '=', ctx.input.nodeId)
    .where('tenant_id', '=', ctx.tenantId)
    .executeTakeFirst();
  if (!node) throw notFound('node', ctx.input.nodeId);
  const latest = await db
    .selectFrom('compute.node_inventories')
    .selectAll()
    .where('node_id', '=', node.id)
    .where('revision', '=', node.reported_revision)
    .executeTakeFirstOrThrow();
  return {
    nodeId: node.id,
    revision: latest.revision,
    inventory: latest.inventory,
    recordedAt: iso(latest.recorded_at),
    applied: node.inventory_revision === node.reported_revision,
  };
}

export async function inventoryHistory(
  ctx: CallContext<{ nodeId: string; limit: number; cursor?: string | undefined }>,
) {
  const db = fleetDb(ctx.db);
  const node = await db
    .selectFrom('compute.nodes')
    .select('id')
    .where('id', '=', ctx.input.nodeId)
    .where('tenant_id', '=', ctx.tenantId)
    .executeTakeFirst();
  if (!node) throw notFound('node', ctx.input.nodeId);
  let query = db.selectFrom('compute.node_inventories').selectAll().where('node_id', '=', node.id);
  // The schema took only a revision this list could have given (pageInputByRevision): digits, in
  // the range of the column, so the database is never sent a number it refuses.
  if (ctx.input.cursor) query = query.where('revision', '<', Number(ctx.input.cursor));
  const rows = await query
    .orderBy('revision', 'desc')
    .limit(ctx.input.limit + 1)
    .execute();
  const page = rows.slice(0, ctx.input.limit);
  return {
    items: page.map((r) => ({
      nodeId: r.node_id,
      revision: r.revision,
      inventory: r.inventory,
      recordedAt: iso(r.recorded_at),
    })),
    nextCursor: rows.length > ctx.input.limit ? String(page.at(-1)!.revision) : null,
  };
}

type Change = { path: string; kind: 'added' | 'removed' | 'changed'; before: unknown; after: unknown };

/** The changes from one inventory to another, GPUs matched by index. */
function diffInventories(before: StoredInventory, after: StoredInventory): Change[] {
  const changes: Change[] = [];
  for (const key of ['cpuCores', 'memoryGiB'] as const) {
    if (before[key] !== after[key])
      changes.push({ path: key, kind: 'changed', before: before[key], after: after[key] });
  }
  const old = new Map(before.gpus.map((g) => [g.index, g]));
  const now = new Map(after.gpus.map((g) => [g.index, g]));
  const indices = [...new Set([...old.keys(), ...now.keys()])].sort((a, b) => a - b);
  for (const index of indices) {
    const a = old.get(index);
    const b = now.get(index);
    if (a && !b) changes.push({ path: `gpus[${index}]`, kind: 'removed', before: a, after: null });
    else if (!a && b) changes.push({ path: `gpus[${index}]`, kind: 'added', before: null, after: b });
    else if (a && b) {
      for (const field of ['model', 'product', 'vramGiB', 'nvlinkDomain'] as const) {
        if (a[field] !== b[field])
          changes.push({
            path: `gpus[${index}].${field}`,
            kind: 'changed',
            before: a[field],
            after: b[field],
          });
      }
    }
  }
  return changes;
}

export async function inventoryDiff(
  ctx: CallContext<{ nodeId: string; fromRevision?: number | undefined; toRevision?: number | undefined }>,
) {
  const db = fleetDb(ctx.db);
  const node = await db
    .selectFrom('compute.nodes')
    .select(['id', 'reported_revision'])
    .where('id', '=', ctx.input.nodeId)
    .where('tenant_id', '=', ctx.tenantId)
    .executeTakeFirst();
  if (!node) throw notFound('node', ctx.input.nodeId);
  const to = ctx.input.toRevision ?? node.reported_revision;
  const from = ctx.input.fromRevision ?? Math.max(1, to - 1);
  const rows = await db
    .selectFrom('compute.node_inventories')
    .selectAll()
    .where('node_id', '=', node.id)
    .where('revision', 'in', [from, to])
    .execute();
  const a = rows.find((r) => r.revision === from);
  const b = rows.find((r) => r.revision === to);
  if (!a || !b)
    throw new ComputeError('NOT_FOUND', `node ${node.id} has no inventory revision ${!a ? from : to}`, {
      details: { latest: node.reported_revision },
      hint: `Its revisions go from 1 to ${node.reported_revision}: better-compute inventory history ${node.id} lists them.`,
    });
  return {
    nodeId: node.id,
    fromRevision: from,
    toRevision: to,
    changes: diffInventories(a.inventory, b.inventory),
  };
}
