/**
 * Pools (owned by a tenant, at one of its sites, offered to other tenants). A pool is visible to its
 * owner and to the tenants it is offered to; only the owner changes it. Quotas: quotas.ts.
 */
import { ComputeError, newId } from '@better-compute/core';
import type { Selectable } from 'kysely';
import type { CallContext } from '../define-module.js';
import { checkVersion, iso, nextLabels, notFound, pageOfRows, sameLabels } from './common.js';
import { findDriver } from './drivers.js';
import type { Emit } from './node-states.js';
import { type FleetDb, type PoolsTable, fleetDb } from './tables.js';

export type PoolRow = Selectable<PoolsTable>;

/** The tenants a pool is offered to: accepted offers give access; pending ones wait for the tenant. */
export interface PoolOffers {
  offeredTo: string[];
  offerPending: string[];
}

const NO_OFFERS: PoolOffers = { offeredTo: [], offerPending: [] };

export function poolView(row: PoolRow, tenantId: string, offers: PoolOffers = NO_OFFERS) {
  const owner = row.tenant_id === tenantId;
  return {
    id: row.id,
    tenantId: row.tenant_id,
    siteId: row.site_id,
    name: row.name,
    class: row.class,
    driver: row.driver,
    state: row.state,
    description: row.description,
    labels: row.labels,
    offeredTo: owner ? offers.offeredTo : [],
    offerPending: owner ? offers.offerPending : [],
    access: owner ? ('owner' as const) : ('offered' as const),
    version: row.version,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

/** Each pool's offers, accepted and pending, by tenant id. */
export async function offersOf(db: FleetDb, poolIds: string[]): Promise<Map<string, PoolOffers>> {
  const map = new Map<string, PoolOffers>();
  if (poolIds.length === 0) return map;
  const of = (poolId: string) => {
    let offers = map.get(poolId);
    if (!offers) map.set(poolId, (offers = { offeredTo: [], offerPending: [] }));
    return offers;
  };
  for (const row of await db
    .selectFrom('compute.pool_offers')
    .select(['pool_id', 'tenant_id'])
    .where('pool_id', 'in', poolIds)
    .orderBy('tenant_id')
    .execute())
    of(row.pool_id).offeredTo.push(row.tenant_id);
  for (const row of await db
    .selectFrom('compute.pending_offers')
    .select(['pool_id', 'tenant_id'])
    .where('pool_id', 'in', poolIds)
    .orderBy('tenant_id')
    .execute())
    of(row.pool_id).offerPending.push(row.tenant_id);
  return map;
}

/** A pool the tenant owns or is offered; NOT_FOUND otherwise. */
export async function visiblePool(
  db: FleetDb,
  tenantId: string,
  poolId: string,
): Promise<{ pool: PoolRow; owner: boolean }> {
  const row = await db
    .selectFrom('compute.pools as p')
    .selectAll('p')
    .select((eb) =>
      eb
        .exists(
          eb
            .selectFrom('compute.pool_offers as o')
            .select('o.pool_id')
            .whereRef('o.pool_id', '=', 'p.id')
            .where('o.tenant_id', '=', tenantId),
        )
        .as('offered'),
    )
    .where('p.id', '=', poolId)
    .executeTakeFirst();
  if (!row) throw notFound('pool', poolId);
  const { offered, ...pool } = row;
  if (pool.tenant_id === tenantId) return { pool, owner: true };
  if (!offered) throw notFound('pool', poolId);
  return { pool, owner: false };
}

/**
 * What a tenant offered a pool can do with it, said by the owner-only refusals: the CLI's own
 * ACCESS_DENIED hint (check --tenant, then your roles) is wrong when the tenant and roles are right
 * and the pool is someone else's.
 */
export function offeredCan(poolId: string): string {
  return `Your tenant is offered it: it can reserve from it (better-compute reserve --pool ${poolId}) and read its own quota (better-compute quotas get --pool ${poolId}).`;
}

/** A pool the tenant owns: NOT_FOUND when it cannot see it, ACCESS_DENIED when it is only offered. */
export async function ownedPool(
  db: FleetDb,
  tenantId: string,
  poolId: string,
  forUpdate = false,
): Promise<PoolRow> {
  const { pool, owner } = await visiblePool(db, tenantId, poolId);
  if (!owner) {
    // The owner's id is in the message already (and in pools get, which the offered tenant may
    // read); the hint names nothing more of it.
    throw new ComputeError(
      'ACCESS_DENIED',
      `pool ${poolId} belongs to tenant ${pool.tenant_id}; only its owner can change it`,
      {
        details: { reason: 'not-owner', poolId },
        hint: `Pool ${poolId} is managed by its owner, tenant ${pool.tenant_id}: an administrator there changes it (its offers, quotas, join tokens, archiving). ${offeredCan(poolId)}`,
      },
    );
  }
  if (!forUpdate) return pool;
  return db
    .selectFrom('compute.pools')
    .selectAll()
    .where('id', '=', poolId)
    .forUpdate()
    .executeTakeFirstOrThrow();
}

/** ALREADY_EXISTS for a pool name the tenant has used, pointing at the pool that has it. */
async function checkPoolName(db: FleetDb, tenantId: string, name: string): Promise<void> {
  const taken = await db
    .selectFrom('compute.pools')
    .select(['id', 'state'])
    .where('tenant_id', '=', tenantId)
    .where('name', '=', name)
    .executeTakeFirst();
  if (!taken) return;
  // Names stay with archived pools, which pools list leaves out unless asked, so the hint says
  // where that one is and how its name is freed (an archived pool may still be renamed).
  throw new ComputeError('ALREADY_EXISTS', `a pool named ${name} exists`, {
    details: { id: taken.id, state: taken.state },
    hint:
      taken.state === 'archived'
        ? `The name belongs to archived pool ${taken.id}, which better-compute pools list --archived shows. Choose another name, or free this one by renaming the archived pool (better-compute pools update ${taken.id} --name NEW); nothing was changed.`
        : `Pool ${taken.id} has that name (better-compute pools get ${taken.id}): choose another name; nothing was changed.`,
  });
}

export async function listPools(
  ctx: CallContext<{
    class?: 'gpu' | 'vps' | 'metal' | undefined;
    name?: string | undefined;
    includeArchived: boolean;
    limit: number;
    cursor?: string | undefined;
  }>,
) {
  const db = fleetDb(ctx.db);
  let query = db
    .selectFrom('compute.pools')
    .selectAll()
    .where((eb) =>
      eb.or([
        eb('tenant_id', '=', ctx.tenantId),
        eb(
          'id',
          'in',
          eb.selectFrom('compute.pool_offers').select('pool_id').where('tenant_id', '=', ctx.tenantId),
        ),
      ]),
    );
  if (ctx.input.class) query = query.where('class', '=', ctx.input.class);
  if (ctx.input.name) query = query.where('name', '=', ctx.input.name);
  if (!ctx.input.includeArchived) query = query.where('state', '=', 'active');
  if (ctx.input.cursor) query = query.where('id', '>', ctx.input.cursor);
  const rows = await query
    .orderBy('id')
    .limit(ctx.input.limit + 1)
    .execute();
  const offers = await offersOf(
    db,
    rows.map((r) => r.id),
  );
  return pageOfRows(rows, ctx.input.limit, (row) => poolView(row, ctx.tenantId, offers.get(row.id)));
}

export async function getPool(ctx: CallContext<{ poolId: string }>) {
  const db = fleetDb(ctx.db);
  const { pool } = await visiblePool(db, ctx.tenantId, ctx.input.poolId);
  return poolView(pool, ctx.tenantId, (await offersOf(db, [pool.id])).get(pool.id));
}

export async function createPool(
  ctx: CallContext<{
    siteId: string;
    name: string;
    class: 'gpu' | 'vps' | 'metal';
    driver: string;
    description?: string | undefined;
    labels?: Record<string, string> | undefined;
  }>,
) {
  const { input } = ctx;
  const db = fleetDb(ctx.db);
  const driver = findDriver(input.driver);
  if (!driver) {
    throw new ComputeError('INVALID_ARGUMENT', `driver ${input.driver} is not registered`, {
      details: { field: 'driver' },
      hint: 'Run better-compute drivers list for the drivers this build supports.',
    });
  }
  if (!driver.classes.includes(input.class)) {
    throw new ComputeError('INVALID_ARGUMENT', `driver ${driver.name} does not run ${input.class} pools`, {
      details: { field: 'class' },
    });
  }
  const site = await db
    .selectFrom('compute.sites')
    .select('id')
    .where('id', '=', input.siteId)
    .where('tenant_id', '=', ctx.tenantId)
    .executeTakeFirst();
  if (!site) throw notFound('site', input.siteId);
  await checkPoolName(db, ctx.tenantId, input.name);
  const now = ctx.now();
  const row = await db
    .insertInto('compute.pools')
    .values({
      id: newId('pool'),
      tenant_id: ctx.tenantId,
      site_id: site.id,
      name: input.name,
      class: input.class,
      driver: driver.name,
      description: input.description ?? '',
      labels: JSON.stringify(input.labels ?? {}),
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({
    type: 'pool.created',
    subject: { type: 'pool', id: row.id },
    data: { name: row.name, class: row.class, siteId: row.site_id },
  });
  return poolView(row, ctx.tenantId);
}

export async function bumpPool(
  ctx: CallContext,
  pool: PoolRow,
  set: Partial<{ name: string; description: string; labels: string; state: 'archived' }>,
) {
  const db = fleetDb(ctx.db);
  const row = await db
    .updateTable('compute.pools')
    .set({ ...set, version: pool.version + 1, updated_at: ctx.now() })
    .where('id', '=', pool.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  return poolView(row, ctx.tenantId, (await offersOf(db, [row.id])).get(row.id));
}

export async function updatePool(
  ctx: CallContext<{
    poolId: string;
    name?: string | undefined;
    description?: string | undefined;
    labels?: Record<string, string> | undefined;
    removeLabels?: string[] | undefined;
    ifVersion?: number | undefined;
  }>,
) {
  const { input } = ctx;
  const db = fleetDb(ctx.db);
  const pool = await ownedPool(db, ctx.tenantId, input.poolId, true);
  checkVersion('pool', pool.id, pool.version, input.ifVersion);
  const labels = nextLabels(pool.labels, input.labels, input.removeLabels);
  const set = {
    ...(input.name !== undefined && input.name !== pool.name ? { name: input.name } : {}),
    ...(input.description !== undefined && input.description !== pool.description
      ? { description: input.description }
      : {}),
    ...(!sameLabels(labels, pool.labels) ? { labels: JSON.stringify(labels) } : {}),
  };
  // Nothing changes: no version, no event, so an --if-version writer is not sent a CONFLICT for it.
  if (Object.keys(set).length === 0)
    return poolView(pool, ctx.tenantId, (await offersOf(db, [pool.id])).get(pool.id));
  if (set.name !== undefined) await checkPoolName(db, ctx.tenantId, set.name);
  const view = await bumpPool(ctx, pool, set);
  ctx.emit({ type: 'pool.updated', subject: { type: 'pool', id: pool.id }, data: { version: view.version } });
  return view;
}

/**
 * Closes join tokens, one or every token of a pool being archived: each is revoked, and the join
 * requests made with them that still wait are rejected with `reason`, so no machine is admitted on
 * a token that no longer vouches for it and the token lists as what it is. Here, not in join.ts,
 * because archiving needs it and join.ts imports this module. Locks tokens, then requests; the
 * caller takes the pool's row after them (joins and approvals lock a token or request first, then
 * the pool's key through their inserts).
 */
export async function closeJoinTokens(
  db: FleetDb,
  target: { tokenId: string } | { poolId: string },
  reason: string,
  now: Date,
  emit: Emit,
): Promise<void> {
  const revoked = await db
    .updateTable('compute.join_tokens')
    .set({ revoked_at: now })
    .where('revoked_at', 'is', null)
    .where((eb) => ('tokenId' in target ? eb('id', '=', target.tokenId) : eb('pool_id', '=', target.poolId)))
    .returning(['id', 'tenant_id', 'pool_id'])
    .execute();
  for (const token of revoked.sort((a, b) => (a.id < b.id ? -1 : 1))) {
    // Site tokens share the table (join.ts); each says what it is in its own event.
    if (token.id.startsWith('stok_'))
      emit({
        type: 'siteToken.revoked',
        tenantId: token.tenant_id,
        subject: { type: 'siteToken', id: token.id },
        data: { poolId: token.pool_id, reason },
      });
    else
      emit({
        type: 'joinToken.revoked',
        tenantId: token.tenant_id,
        subject: { type: 'joinToken', id: token.id },
        data: { poolId: token.pool_id, reason },
      });
  }
  const rejected = await db
    .updateTable('compute.join_requests')
    .set({ state: 'rejected', reason, decided_at: now })
    .where('state', '=', 'pending')
    .where((eb) =>
      'tokenId' in target ? eb('join_token_id', '=', target.tokenId) : eb('pool_id', '=', target.poolId),
    )
    .returning(['id', 'tenant_id'])
    .execute();
  for (const request of rejected.sort((a, b) => (a.id < b.id ? -1 : 1)))
    emit({
      type: 'joinRequest.rejected',
      tenantId: request.tenant_id,
      subject: { type: 'joinRequest', id: request.id },
      data: { reason },
    });
}

export async function archivePool(ctx: CallContext<{ poolId: string; ifVersion?: number | undefined }>) {
  const db = fleetDb(ctx.db);
  const peek = await ownedPool(db, ctx.tenantId, ctx.input.poolId);
  // Its join tokens close first (see closeJoinTokens for the lock order); an archived pool admits
  // no machine, so they list as revoked, as the join route answers them. Repeated on an archived
  // pool, it closes tokens left open by an archive from before this rule.
  await closeJoinTokens(db, { poolId: peek.id }, 'pool archived', ctx.now(), ctx.emit);
  const pool = await ownedPool(db, ctx.tenantId, ctx.input.poolId, true);
  checkVersion('pool', pool.id, pool.version, ctx.input.ifVersion);
  if (pool.state === 'archived')
    return poolView(pool, ctx.tenantId, (await offersOf(db, [pool.id])).get(pool.id));
  const view = await bumpPool(ctx, pool, { state: 'archived' });
  ctx.emit({ type: 'pool.archived', subject: { type: 'pool', id: pool.id } });
  return view;
}

/**
 * Offers a pool to a tenant, or withdraws the offer. Offering a tenant it is offered to, or
 * withdrawing from one it is not, changes nothing and succeeds as it is (no version, no event), so
 * a retried call and an --if-version writer behave; the answer's offeredTo shows the offers.
 */
/** INVALID_STATE for an archived pool asked to take on something new, as reserving from it is. */
export function archived(pool: PoolRow): ComputeError {
  return new ComputeError('INVALID_STATE', `pool ${pool.id} is archived`, {
    details: { state: pool.state },
    hint: 'An archived pool takes no new work; better-compute pools list shows the active ones.',
  });
}
