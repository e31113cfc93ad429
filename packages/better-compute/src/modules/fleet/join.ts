/**
 * Joining: join tokens (`jtok_….SECRET`, stored as a SHA-256 hash), join requests, and the public
 * routes a node daemon calls: `nodes.join` with a token, `nodes.claim` for its node credential
 * once approved (heartbeat.ts: `nodes.heartbeat` with that credential, `node_….SECRET`, also stored
 * hashed and checked in constant time). See docs/decisions/fleet-joining.md.
 */
import { ComputeError, newId } from '@better-compute/core';
import type { Selectable } from 'kysely';
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
import { createNode, refuseSystemLabels } from './nodes.js';
import { closeJoinTokens, ownedPool } from './pools.js';
import {
  type FleetDb,
  type JoinRequestsTable,
  type JoinTokensTable,
  type NodeRole,
  type StoredInventory,
  fleetDb,
} from './tables.js';

type TokenRow = Selectable<JoinTokensTable>;
type RequestRow = Selectable<JoinRequestsTable>;

/**
 * Join tokens and site tokens are one table and one code path: a token's id prefix is its kind
 * (`jtok_` makes a worker, `stok_` its site's agent), so the kind can never disagree with the row
 * and nothing else about joining differs between them.
 */
export type TokenKind = 'joinToken' | 'siteToken';
const TOKEN_PREFIX = { joinToken: 'jtok', siteToken: 'stok' } as const;
const kindOfToken = (id: string): TokenKind => (id.startsWith('stok_') ? 'siteToken' : 'joinToken');
/** The role of the node a token makes. */
const roleOfToken = (id: string): NodeRole => (kindOfToken(id) === 'siteToken' ? 'site-agent' : 'worker');
const tokenWords = { joinToken: 'join token', siteToken: 'site token' } as const;

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

type TokenInput = {
  poolId: string;
  uses: number;
  lifetimeSeconds: number;
  preApproved: boolean;
  description?: string | undefined;
};

/** joinTokens.create and siteTokens.create: the same row, the kind in the id's prefix. */
async function createToken(ctx: CallContext<TokenInput>, kind: TokenKind) {
  const db = fleetDb(ctx.db);
  const pool = await ownedPool(db, ctx.tenantId, ctx.input.poolId);
  if (pool.state !== 'active') throw new ComputeError('INVALID_STATE', `pool ${pool.id} is archived`);
  const now = ctx.now();
  const id = newId(kind);
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
  const data = { poolId: pool.id, uses: row.uses_allowed, preApproved: row.pre_approved };
  if (kind === 'siteToken')
    ctx.emit({
      type: 'siteToken.created',
      subject: { type: 'siteToken', id },
      data: { ...data, siteId: pool.site_id },
    });
  else ctx.emit({ type: 'joinToken.created', subject: { type: 'joinToken', id }, data });
  return { row, token: `${id}.${secret}`, siteId: pool.site_id };
}

export async function createJoinToken(ctx: CallContext<TokenInput>) {
  const { row, token } = await createToken(ctx, 'joinToken');
  return { joinToken: tokenView(row, ctx.now()), token };
}

export async function createSiteToken(ctx: CallContext<TokenInput>) {
  const { row, token, siteId } = await createToken(ctx, 'siteToken');
  return { siteToken: { ...tokenView(row, ctx.now()), siteId }, token };
}

export async function listJoinTokens(
  ctx: CallContext<{ poolId?: string | undefined; limit: number; cursor?: string | undefined }>,
) {
  const db = fleetDb(ctx.db);
  let query = db
    .selectFrom('compute.join_tokens')
    .selectAll()
    .where('tenant_id', '=', ctx.tenantId)
    // Site tokens share the table; they are not join tokens to list or revoke here.
    .where('id', 'like', 'jtok\\_%');
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

/** joinTokens.revoke and siteTokens.revoke: a token of the other kind is not found here. */
async function revokeToken(ctx: CallContext<unknown>, id: string, kind: TokenKind): Promise<TokenRow> {
  const db = fleetDb(ctx.db);
  const row = await db
    .selectFrom('compute.join_tokens')
    .select('id')
    .where('id', '=', id)
    .where('tenant_id', '=', ctx.tenantId)
    .executeTakeFirst();
  if (!row || kindOfToken(row.id) !== kind) throw notFound(tokenWords[kind], id);
  await closeJoinTokens(db, { tokenId: row.id }, `${tokenWords[kind]} revoked`, ctx.now(), ctx.emit);
  return db.selectFrom('compute.join_tokens').selectAll().where('id', '=', row.id).executeTakeFirstOrThrow();
}

export async function revokeJoinToken(ctx: CallContext<{ joinTokenId: string }>) {
  return tokenView(await revokeToken(ctx, ctx.input.joinTokenId, 'joinToken'), ctx.now());
}

export async function revokeSiteToken(ctx: CallContext<{ siteTokenId: string }>) {
  const row = await revokeToken(ctx, ctx.input.siteTokenId, 'siteToken');
  const pool = await fleetDb(ctx.db)
    .selectFrom('compute.pools')
    .select('site_id')
    .where('id', '=', row.pool_id)
    .executeTakeFirstOrThrow();
  return { ...tokenView(row, ctx.now()), siteId: pool.site_id };
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
    role: roleOfToken(request.join_token_id),
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
  const parts =
    splitToken(ctx.input.joinToken, TOKEN_PREFIX.joinToken) ??
    splitToken(ctx.input.joinToken, TOKEN_PREFIX.siteToken);
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
      role: roleOfToken(token.id),
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
