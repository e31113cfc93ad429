/**
 * Offers of a pool to other tenants. The platform's stand at once; another tenant's offer waits in
 * `compute.pending_offers` until an administrator of the offered tenant accepts it (or declines it),
 * so no tenant can put a pool of its naming in another's list (docs/decisions/offers.md). Only
 * accepted offers (`compute.pool_offers`) give access.
 */
import { ComputeError, ROOT_TENANT } from '@better-compute/core';
import type { CallContext } from '../define-module.js';
import { checkVersion, iso, notFound } from './common.js';
import { archived, bumpPool, offersOf, ownedPool, poolView } from './pools.js';
import { fleetDb } from './tables.js';

export async function offerPool(
  ctx: CallContext<{ poolId: string; offerTenantId: string; ifVersion?: number | undefined }>,
  offer: boolean,
) {
  const db = fleetDb(ctx.db);
  const pool = await ownedPool(db, ctx.tenantId, ctx.input.poolId, true);
  checkVersion('pool', pool.id, pool.version, ctx.input.ifVersion);
  if (ctx.input.offerTenantId === ctx.tenantId) {
    throw new ComputeError(
      'INVALID_ARGUMENT',
      'a pool is always available to its owner; offer it to another tenant',
      { details: { field: 'offerTenantId' } },
    );
  }
  // An archived pool takes no new work, so it gains no tenant to take it; withdrawing an offer
  // only removes, and stays allowed (the pool's row is locked, so an archive cannot pass between).
  if (offer && pool.state !== 'active') throw archived(pool);
  // The platform's offers stand at once; another tenant's wait until the offered tenant accepts
  // (offers.accept), so no tenant can put a pool it names in another's list (docs/decisions/offers.md).
  const direct = ctx.tenantId === ROOT_TENANT;
  const offered = { pool_id: pool.id, tenant_id: ctx.input.offerTenantId };
  let changed: unknown[];
  if (!offer) {
    changed = [
      ...(await db
        .deleteFrom('compute.pool_offers')
        .where('pool_id', '=', pool.id)
        .where('tenant_id', '=', ctx.input.offerTenantId)
        .returning('tenant_id')
        .execute()),
      ...(await db
        .deleteFrom('compute.pending_offers')
        .where('pool_id', '=', pool.id)
        .where('tenant_id', '=', ctx.input.offerTenantId)
        .returning('tenant_id')
        .execute()),
    ];
  } else if (direct) {
    changed = await db
      .insertInto('compute.pool_offers')
      .values({ ...offered, created_at: ctx.now() })
      .onConflict((oc) => oc.columns(['pool_id', 'tenant_id']).doNothing())
      .returning('tenant_id')
      .execute();
  } else {
    const standing = await db
      .selectFrom('compute.pool_offers')
      .select('tenant_id')
      .where('pool_id', '=', pool.id)
      .where('tenant_id', '=', ctx.input.offerTenantId)
      .executeTakeFirst();
    changed = standing
      ? []
      : await db
          .insertInto('compute.pending_offers')
          .values({ ...offered, offered_at: ctx.now() })
          .onConflict((oc) => oc.columns(['pool_id', 'tenant_id']).doNothing())
          .returning('tenant_id')
          .execute();
  }
  if (changed.length === 0) return poolView(pool, ctx.tenantId, (await offersOf(db, [pool.id])).get(pool.id));
  const view = await bumpPool(ctx, pool, {});
  ctx.emit({
    type: offer ? 'pool.offered' : 'pool.unoffered',
    subject: { type: 'pool', id: pool.id },
    data: { tenantId: ctx.input.offerTenantId, ...(offer && !direct ? { pending: true } : {}) },
  });
  return view;
}

/** The offers made to the acting tenant: pending ones to accept, and accepted ones. */
export async function listOffers(ctx: CallContext<{ state?: 'pending' | 'accepted' | undefined }>) {
  const db = fleetDb(ctx.db);
  const pending =
    ctx.input.state === 'accepted'
      ? []
      : await db
          .selectFrom('compute.pending_offers as o')
          .innerJoin('compute.pools as p', 'p.id', 'o.pool_id')
          .select(['o.pool_id', 'p.name', 'p.tenant_id', 'p.class', 'o.offered_at as at'])
          .where('o.tenant_id', '=', ctx.tenantId)
          .orderBy('o.pool_id')
          .execute();
  const accepted =
    ctx.input.state === 'pending'
      ? []
      : await db
          .selectFrom('compute.pool_offers as o')
          .innerJoin('compute.pools as p', 'p.id', 'o.pool_id')
          .select(['o.pool_id', 'p.name', 'p.tenant_id', 'p.class', 'o.created_at as at'])
          .where('o.tenant_id', '=', ctx.tenantId)
          .orderBy('o.pool_id')
          .execute();
  const view = (state: 'pending' | 'accepted') => (row: (typeof pending)[number]) => ({
    poolId: row.pool_id,
    poolName: row.name,
    ownerTenantId: row.tenant_id,
    class: row.class,
    state,
    since: iso(row.at),
  });
  return { items: [...pending.map(view('pending')), ...accepted.map(view('accepted'))], nextCursor: null };
}

/** Accepts (or declines) an offer made to the acting tenant. */
export async function answerOffer(ctx: CallContext<{ poolId: string }>, accept: boolean) {
  const db = fleetDb(ctx.db);
  const pending = await db
    .deleteFrom('compute.pending_offers')
    .where('pool_id', '=', ctx.input.poolId)
    .where('tenant_id', '=', ctx.tenantId)
    .returning(['pool_id', 'offered_at'])
    .executeTakeFirst();
  if (!pending) {
    const standing = await db
      .selectFrom('compute.pool_offers')
      .select('pool_id')
      .where('pool_id', '=', ctx.input.poolId)
      .where('tenant_id', '=', ctx.tenantId)
      .executeTakeFirst();
    // Accepting an offer that stands already changes nothing (retry-safe); otherwise there is none.
    if (standing && accept) return { poolId: ctx.input.poolId, state: 'accepted' as const };
    throw notFound('offer of pool', ctx.input.poolId);
  }
  const pool = await db
    .selectFrom('compute.pools')
    .selectAll()
    .where('id', '=', ctx.input.poolId)
    .forUpdate()
    .executeTakeFirstOrThrow();
  if (accept && pool.state !== 'active') throw archived(pool);
  if (accept)
    await db
      .insertInto('compute.pool_offers')
      .values({ pool_id: pool.id, tenant_id: ctx.tenantId, created_at: ctx.now() })
      .onConflict((oc) => oc.columns(['pool_id', 'tenant_id']).doNothing())
      .execute();
  // In the owner's events, where its offer was made, and in the offered tenant's.
  for (const tenantId of [pool.tenant_id, ctx.tenantId])
    ctx.emit({
      type: accept ? 'pool.offer-accepted' : 'pool.offer-declined',
      subject: { type: 'pool', id: pool.id },
      data: { tenantId: ctx.tenantId },
      tenantId,
    });
  return { poolId: pool.id, state: accept ? ('accepted' as const) : ('declined' as const) };
}
