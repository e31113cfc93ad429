/**
 * Joining: join tokens (`jtok_….SECRET`, stored as a SHA-256 hash), join requests, and the public
 * routes a node daemon calls: `nodes.join` with a token, `nodes.claim` for its node credential
 * once approved, `nodes.heartbeat` with that credential (`node_….SECRET`, also stored hashed and
 * checked in constant time). See docs/decisions/fleet-joining.md.
 */
import { canonicalJson, ComputeError, newId } from '@better-compute/core';
import { type Selectable, sql } from 'kysely';
import { activateQueue, lockPool, reservationsOnNode } from '../capacity/service.js';
import type { CallContext } from '../define-module.js';
import {
  checkLabelCount,
  iso,
  isoOrNull,
  newSecret,
  notFound,
  pageOfRows,
  secretMatches,
  sha256Hex,
  splitToken,
} from './common.js';
import { completeDrains, setNodeState, settleInventory } from './node-states.js';
import {
  createNode,
  HEARTBEAT_INTERVAL_SECONDS,
  OFFLINE_AFTER_SECONDS,
  refuseSystemLabels,
} from './nodes.js';
import { closeJoinTokens, ownedPool } from './pools.js';
import {
  type FleetDb,
  fleetDb,
  type JoinRequestsTable,
  type JoinTokensTable,
  type StoredInventory,
} from './tables.js';

type TokenRow = Selectable<JoinTokensTable>;
type RequestRow = Selectable<JoinRequestsTable>;

function tokenState(row: TokenRow, now: Date): 'active' | 'used' | 'expired' | 'revoked' {
  if (row.revoked_at) return 'revoked';
  if (row.uses >= row.uses_allowed) return 'used';
  if (new Date(row.expires_at) <= now) return 'expired';
  return 'active';
}

function tokenView(row: TokenRow, now: Date) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    poolId: row.pool_id,
    description: row.description,
    usesAllowed: row.uses_allowed,
    usesLeft: Math.max(0, row.uses_allowed - row.uses),
    preApproved: row.pre_approved,
    state: tokenState(row, now),
    expiresAt: iso(row.expires_at),
    revokedAt: isoOrNull(row.revoked_at),
    createdAt: iso(row.created_at),
  };
}

function requestView(row: RequestRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    poolId: row.pool_id,
    joinTokenId: row.join_token_id,
    hostname: row.hostname,
    inventory: row.inventory,
    labels: row.labels,
    state: row.state,
    nodeId: row.node_id,
    reason: row.reason,
    createdAt: iso(row.created_at),
    decidedAt: isoOrNull(row.decided_at),
  };
}

export async function createJoinToken(
  ctx: CallContext<{
    poolId: string;
    uses: number;
    lifetimeSeconds: number;
    preApproved: boolean;
    description?: string | undefined;
  }>,
) {
  const db = fleetDb(ctx.db);
  const pool = await ownedPool(db, ctx.tenantId, ctx.input.poolId);
  if (pool.state !== 'active') throw new ComputeError('INVALID_STATE', `pool ${pool.id} is archived`);
  const now = ctx.now();
  const id = newId('joinToken');
  const secret = newSecret();
  const row = await db
    .insertInto('compute.join_tokens')
    .values({
      id,
      tenant_id: ctx.tenantId,
      pool_id: pool.id,
      secret_hash: sha256Hex(secret),
      description: ctx.input.description ?? '',
      uses_allowed: ctx.input.uses,
      pre_approved: ctx.input.preApproved,
      expires_at: new Date(now.getTime() + ctx.input.lifetimeSeconds * 1000),
      revoked_at: null,
      created_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({
    type: 'joinToken.created',
    subject: { type: 'joinToken', id },
    data: { poolId: pool.id, uses: row.uses_allowed, preApproved: row.pre_approved },
  });
  return { joinToken: tokenView(row, now), token: `${id}.${secret}` };
}

export async function listJoinTokens(
  ctx: CallContext<{ poolId?: string | undefined; limit: number; cursor?: string | undefined }>,
) {
  const db = fleetDb(ctx.db);
  let query = db.selectFrom('compute.join_tokens').selectAll().where('tenant_id', '=', ctx.tenantId);
  // As nodes.list: a pool filter names one of the tenant's own pools (NOT_FOUND, ACCESS_DENIED).
  if (ctx.input.poolId) {
    await ownedPool(db, ctx.tenantId, ctx.input.poolId);
    query = query.where('pool_id', '=', ctx.input.poolId);
  }
  if (ctx.input.cursor) query = query.where('id', '>', ctx.input.cursor);
  const rows = await query
    .orderBy('id')
    .limit(ctx.input.limit + 1)
    .execute();
  const now = ctx.now();
  return pageOfRows(rows, ctx.input.limit, (row) => tokenView(row, now));
}

export async function revokeJoinToken(ctx: CallContext<{ joinTokenId: string }>) {
  const db = fleetDb(ctx.db);
  const row = await db
    .selectFrom('compute.join_tokens')
    .select('id')
    .where('id', '=', ctx.input.joinTokenId)
    .where('tenant_id', '=', ctx.tenantId)
    .executeTakeFirst();
  if (!row) throw notFound('join token', ctx.input.joinTokenId);
  await closeJoinTokens(db, { tokenId: row.id }, 'join token revoked', ctx.now(), ctx.emit);
  const updated = await db
    .selectFrom('compute.join_tokens')
    .selectAll()
    .where('id', '=', row.id)
    .executeTakeFirstOrThrow();
  return tokenView(updated, ctx.now());
}

export async function listJoinRequests(
  ctx: CallContext<{
    state?: 'pending' | 'approved' | 'rejected' | undefined;
    poolId?: string | undefined;
    limit: number;
    cursor?: string | undefined;
  }>,
) {
  const db = fleetDb(ctx.db);
  let query = db.selectFrom('compute.join_requests').selectAll().where('tenant_id', '=', ctx.tenantId);
  if (ctx.input.state) query = query.where('state', '=', ctx.input.state);
  // As nodes.list: a pool filter names one of the tenant's own pools (NOT_FOUND, ACCESS_DENIED).
  if (ctx.input.poolId) {
    await ownedPool(db, ctx.tenantId, ctx.input.poolId);
    query = query.where('pool_id', '=', ctx.input.poolId);
  }
  if (ctx.input.cursor) query = query.where('id', '>', ctx.input.cursor);
  const rows = await query
    .orderBy('id')
    .limit(ctx.input.limit + 1)
    .execute();
  return pageOfRows(rows, ctx.input.limit, requestView);
}

async function pendingRequest(db: FleetDb, tenantId: string, id: string): Promise<RequestRow> {
  const row = await db
    .selectFrom('compute.join_requests')
    .selectAll()
    .where('id', '=', id)
    .where('tenant_id', '=', tenantId)
    .forUpdate()
    .executeTakeFirst();
  if (!row) throw notFound('join request', id);
  if (row.state !== 'pending')
    throw new ComputeError('INVALID_STATE', `join request ${id} is already ${row.state}`, {
      details: { state: row.state, nodeId: row.node_id, reason: row.reason },
      hint:
        row.state === 'approved'
          ? `It made node ${row.node_id}: see it with "better-compute nodes get ${row.node_id}".`
          : `It was turned down${row.reason ? ` (${row.reason})` : ''}; the machine asks again with a join token, and "better-compute join-requests list --state pending" shows what waits.`,
    });
  return row;
}

export async function approveJoinRequest(
  ctx: CallContext<{ joinRequestId: string; labels?: Record<string, string> | undefined }>,
) {
  const db = fleetDb(ctx.db);
  const request = await pendingRequest(db, ctx.tenantId, ctx.input.joinRequestId);
  const pool = await db
    .selectFrom('compute.pools')
    .select(['id', 'state'])
    .where('id', '=', request.pool_id)
    .executeTakeFirstOrThrow();
  if (pool.state !== 'active') throw new ComputeError('INVALID_STATE', `pool ${pool.id} is archived`);
  // The node's labels are the machine's and the operator's together, under the rules of nodes.label.
  refuseSystemLabels(Object.keys(ctx.input.labels ?? {}), 'labels');
  const labels = { ...request.labels, ...ctx.input.labels };
  checkLabelCount(labels, 0, 'labels');
  const nodeId = newId('node');
  const now = ctx.now();
  await createNode(db, {
    id: nodeId,
    tenantId: request.tenant_id,
    poolId: request.pool_id,
    name: request.hostname,
    inventory: request.inventory,
    labels,
    credentialHash: null,
    now,
  });
  const row = await db
    .updateTable('compute.join_requests')
    .set({ state: 'approved', node_id: nodeId, decided_at: now })
    .where('id', '=', request.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({
    type: 'joinRequest.approved',
    subject: { type: 'joinRequest', id: request.id },
    data: { nodeId },
  });
  ctx.emit({
    type: 'node.joining',
    subject: { type: 'node', id: nodeId },
    data: { state: 'joining', poolId: request.pool_id, name: request.hostname, version: 1 },
  });
  return requestView(row);
}

export async function rejectJoinRequest(
  ctx: CallContext<{ joinRequestId: string; reason?: string | undefined }>,
) {
  const db = fleetDb(ctx.db);
  const request = await pendingRequest(db, ctx.tenantId, ctx.input.joinRequestId);
  const row = await db
    .updateTable('compute.join_requests')
    .set({ state: 'rejected', reason: ctx.input.reason ?? null, decided_at: ctx.now() })
    .where('id', '=', request.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({
    type: 'joinRequest.rejected',
    subject: { type: 'joinRequest', id: request.id },
    data: { reason: ctx.input.reason ?? null },
  });
  return requestView(row);
}

const refused = () =>
  new ComputeError('UNAUTHENTICATED', 'the join token is unknown, expired, used up or revoked', {
    hint: 'Mint a new one with better-compute join-tokens create.',
  });

/** The public join route: the token decides; the answer says whether the machine is a node yet. */
export async function joinNode(
  ctx: CallContext<{
    joinToken: string;
    hostname: string;
    inventory: StoredInventory;
    labels?: Record<string, string> | undefined;
  }>,
) {
  const db = fleetDb(ctx.db);
  // What the machine asks to be labelled is checked as nodes.label checks it, before the token is used.
  refuseSystemLabels(Object.keys(ctx.input.labels ?? {}), 'labels');
  const parts = splitToken(ctx.input.joinToken, 'jtok');
  if (!parts) throw refused();
  const token = await db
    .selectFrom('compute.join_tokens')
    .selectAll()
    .where('id', '=', parts.id)
    .forUpdate()
    .executeTakeFirst();
  const now = ctx.now();
  // The hash is compared even for an unknown id, so the answer's timing does not tell them apart.
  const matches = secretMatches(parts.secret, token?.secret_hash ?? null);
  if (!token || !matches || tokenState(token, now) !== 'active') throw refused();
  const pool = await db
    .selectFrom('compute.pools')
    .select(['id', 'state'])
    .where('id', '=', token.pool_id)
    .executeTakeFirstOrThrow();
  if (pool.state !== 'active')
    throw new ComputeError('INVALID_STATE', 'the pool of this join token is archived');
  await db
    .updateTable('compute.join_tokens')
    .set({ uses: token.uses + 1 })
    .where('id', '=', token.id)
    .execute();
  const requestId = newId('joinRequest');
  const emitTo = { tenantId: token.tenant_id };
  if (token.pre_approved) {
    const nodeId = newId('node');
    const secret = newSecret();
    await createNode(db, {
      id: nodeId,
      tenantId: token.tenant_id,
      poolId: token.pool_id,
      name: ctx.input.hostname,
      inventory: ctx.input.inventory,
      labels: ctx.input.labels ?? {},
      credentialHash: sha256Hex(secret),
      now,
    });
    await db
      .insertInto('compute.join_requests')
      .values({
        id: requestId,
        tenant_id: token.tenant_id,
        pool_id: token.pool_id,
        join_token_id: token.id,
        hostname: ctx.input.hostname,
        inventory: JSON.stringify(ctx.input.inventory),
        labels: JSON.stringify(ctx.input.labels ?? {}),
        state: 'approved',
        claim_hash: null,
        claimed: true,
        node_id: nodeId,
        reason: 'pre-approved join token',
        created_at: now,
        decided_at: now,
      })
      .execute();
    ctx.emit({
      ...emitTo,
      type: 'joinRequest.approved',
      subject: { type: 'joinRequest', id: requestId },
      data: { nodeId, preApproved: true },
    });
    ctx.emit({
      ...emitTo,
      type: 'node.joining',
      subject: { type: 'node', id: nodeId },
      data: { state: 'joining', poolId: token.pool_id, name: ctx.input.hostname, version: 1 },
    });
    return {
      joinRequestId: requestId,
      state: 'approved' as const,
      nodeId,
      nodeCredential: `${nodeId}.${secret}`,
      claimSecret: null,
      pollAfterSeconds: 0,
    };
  }
  const claimSecret = newSecret();
  await db
    .insertInto('compute.join_requests')
    .values({
      id: requestId,
      tenant_id: token.tenant_id,
      pool_id: token.pool_id,
      join_token_id: token.id,
      hostname: ctx.input.hostname,
      inventory: JSON.stringify(ctx.input.inventory),
      labels: JSON.stringify(ctx.input.labels ?? {}),
      state: 'pending',
      claim_hash: sha256Hex(claimSecret),
      node_id: null,
      reason: null,
      created_at: now,
      decided_at: null,
    })
    .execute();
  ctx.emit({
    ...emitTo,
    type: 'joinRequest.created',
    subject: { type: 'joinRequest', id: requestId },
    data: { poolId: token.pool_id, hostname: ctx.input.hostname },
  });
  return {
    joinRequestId: requestId,
    state: 'pending' as const,
    nodeId: null,
    nodeCredential: null,
    claimSecret,
    pollAfterSeconds: 10,
  };
}

/** The public claim route: the node credential, issued once after approval. */
export async function claimNode(ctx: CallContext<{ joinRequestId: string; claimSecret: string }>) {
  const db = fleetDb(ctx.db);
  const request = await db
    .selectFrom('compute.join_requests')
    .selectAll()
    .where('id', '=', ctx.input.joinRequestId)
    .forUpdate()
    .executeTakeFirst();
  const matches = secretMatches(ctx.input.claimSecret, request?.claim_hash ?? null);
  if (!request || !matches)
    throw new ComputeError('UNAUTHENTICATED', 'unknown join request or claim secret', {
      hint: 'Send the join request id and claim secret the nodes.join answer gave (a claim secret works until the credential is issued); a machine that lost them joins again with a new join token (better-compute join-tokens create).',
    });
  if (request.state !== 'approved' || !request.node_id) {
    return {
      state: request.state,
      nodeId: null,
      nodeCredential: null,
      reason: request.reason,
      pollAfterSeconds: request.state === 'pending' ? 10 : 0,
    };
  }
  if (request.claimed) {
    throw new ComputeError(
      'INVALID_STATE',
      `the node credential of join request ${request.id} was already issued`,
      {
        hint: 'A node that lost its credential joins again with a new join token.',
      },
    );
  }
  const secret = newSecret();
  await db
    .updateTable('compute.nodes')
    .set({ credential_hash: sha256Hex(secret) })
    .where('id', '=', request.node_id)
    .execute();
  await db
    .updateTable('compute.join_requests')
    .set({ claimed: true, claim_hash: null })
    .where('id', '=', request.id)
    .execute();
  return {
    state: 'approved' as const,
    nodeId: request.node_id,
    nodeCredential: `${request.node_id}.${secret}`,
    reason: null,
    pollAfterSeconds: 0,
  };
}

const inventoriesEqual = (a: StoredInventory, b: StoredInventory) => canonicalJson(a) === canonicalJson(b);

/** The public heartbeat: proves the node credential, brings the node up, records inventory changes. */
export async function heartbeat(
  ctx: CallContext<{ nodeCredential: string; inventory?: StoredInventory | undefined }>,
) {
  const db = fleetDb(ctx.db);
  const parts = splitToken(ctx.input.nodeCredential, 'node');
  const unknown = () =>
    new ComputeError('UNAUTHENTICATED', 'the node credential is unknown or revoked', {
      hint: 'A node credential is issued once and cleared when its node is retired: join the machine again with a new join token (better-compute join-tokens create).',
    });
  if (!parts) throw unknown();
  const peek = await db.selectFrom('compute.nodes').selectAll().where('id', '=', parts.id).executeTakeFirst();
  const matches = secretMatches(parts.secret, peek?.credential_hash ?? null);
  if (!peek || !matches) throw unknown();
  // A heartbeat that may change the node or start queued work takes the pool's lock before the
  // node's, like every other change (see capacity/service.ts); a plain one only stamps the time.
  const changes =
    peek.state === 'joining' ||
    peek.state === 'offline' ||
    ctx.input.inventory !== undefined ||
    peek.reported_revision > peek.inventory_revision;
  if (changes) await lockPool(db, peek.pool_id);
  const node = changes
    ? await db
        .selectFrom('compute.nodes')
        .selectAll()
        .where('id', '=', peek.id)
        .forUpdate()
        .executeTakeFirstOrThrow()
    : peek;
  if (!secretMatches(parts.secret, node.credential_hash)) throw unknown();
  const now = ctx.now();
  const emit = (event: Parameters<typeof ctx.emit>[0]) => ctx.emit({ tenantId: node.tenant_id, ...event });
  await db.updateTable('compute.nodes').set({ last_heartbeat_at: now }).where('id', '=', node.id).execute();
  let freed = false;
  if (node.state === 'joining') {
    await setNodeState(db, node, 'ready', now, emit);
    freed = true;
  } else if (node.state === 'offline') {
    const back = node.state_before_offline ?? 'ready';
    await setNodeState(db, node, back, now, emit, { stateBeforeOffline: null, eventType: 'node.online' });
    for (const r of await reservationsOnNode(db, node.id))
      ctx.emit({
        tenantId: r.tenant_id,
        type: 'reservation.recovered',
        subject: { type: 'reservation', id: r.id },
        data: { nodeId: node.id },
      });
    // A node that was draining may have lost its last reservation while it was away; the answer
    // tells the state after this call.
    if (back === 'draining' && (await completeDrains(db, [node.id], now, emit)).length > 0)
      node.state = 'drained';
    freed = back === 'ready';
  }
  if (ctx.input.inventory) {
    const latest = await db
      .selectFrom('compute.node_inventories')
      .select(['revision', 'inventory'])
      .where('node_id', '=', node.id)
      .orderBy('revision', 'desc')
      .limit(1)
      .executeTakeFirstOrThrow();
    if (!inventoriesEqual(latest.inventory, ctx.input.inventory)) {
      const revision = latest.revision + 1;
      await db
        .insertInto('compute.node_inventories')
        .values({
          node_id: node.id,
          revision,
          inventory: JSON.stringify(ctx.input.inventory),
          recorded_at: now,
        })
        .execute();
      await db
        .updateTable('compute.nodes')
        .set({ reported_revision: revision })
        .where('id', '=', node.id)
        .execute();
      node.reported_revision = revision;
      emit({ type: 'node.inventory.changed', subject: { type: 'node', id: node.id }, data: { revision } });
    }
  }
  // Put in use now if that is safe, else the node is tainted until it is (node-states.ts).
  if (node.reported_revision > node.inventory_revision)
    freed = (await settleInventory(db, node.id, now, emit)) || freed;
  if (freed) await activateQueue(db, node.pool_id, now, ctx.emit);
  // What runs on the node: its groups' slots (migration 0003), with each holder's end time.
  const bindings = (
    await sql<{ reservation_id: string; gpu_index: number; ends_at: Date | null }>`
      select h.reservation_id, h.gpu_index, r.ends_at
      from compute.gpu_groups g
      cross join unnest(g.holders, g.gpu_indices) as h(reservation_id, gpu_index)
      join compute.reservations r on r.id = h.reservation_id
      where g.node_id = ${node.id}
      order by h.reservation_id, h.gpu_index`.execute(db)
  ).rows;
  const byReservation = new Map<string, { reservationId: string; gpuIndices: number[]; endsAt: string }>();
  for (const b of bindings) {
    const entry = byReservation.get(b.reservation_id) ?? {
      reservationId: b.reservation_id,
      gpuIndices: [],
      endsAt: iso(b.ends_at ?? now),
    };
    entry.gpuIndices.push(b.gpu_index);
    byReservation.set(b.reservation_id, entry);
  }
  return {
    nodeId: node.id,
    state: node.state,
    heartbeatIntervalSeconds: HEARTBEAT_INTERVAL_SECONDS,
    offlineAfterSeconds: OFFLINE_AFTER_SECONDS,
    bindings: [...byReservation.values()],
  };
}

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
export function diffInventories(before: StoredInventory, after: StoredInventory): Change[] {
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
