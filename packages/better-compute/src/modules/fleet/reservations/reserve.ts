/**
 * `reservations.create`: the fast path for the common reserve (one node, nothing queued, no quota),
 * and the pool-locked path that places or queues. Lock order: locks.ts.
 */
import { ComputeError } from '@better-compute/core';
import { sentWithCommit } from '@better-compute/db';
import { CompiledQuery, sql } from 'kysely';
import type { CallContext } from '../../define-module.js';
import { notFound } from '../common.js';
import { lockPool } from '../locks.js';
import { visiblePool } from '../pools.js';
import { type FleetDb, fleetDb } from '../tables.js';
import {
  type NewReservation,
  activate,
  emitActivated,
  placeAndBind,
  requestedColumns,
  writeBinding,
} from './binding.js';
import { bestFitNodeOrder, type PlacementRequest, filterSql, groupsQuery, toFree } from './placement-sql.js';
import { place } from './placement.js';
import { activateQueue, quotaAllows } from './queue.js';
import { type SelectorTerm, requestTerms } from './selector.js';
import { type ReservationView, boundViews, loadReservation, reservationView, viewOf } from './views.js';

export async function createReservation(
  ctx: CallContext<PlacementRequest & { projectId?: string | undefined }>,
  /** `vps`: the GPUs of an instance's flavor, taken from its VPS pool (modules/vps). */
  poolClass: 'gpu' | 'vps' = 'gpu',
  /** The instance whose GPUs it holds: then it has no end and lasts as long as the instance. */
  instanceId: string | null = null,
) {
  const db = fleetDb(ctx.db);
  const { input } = ctx;
  const terms = requestTerms(input);
  // The fast pick may lock a node it then skips (its newest version no longer fits) and keep that
  // lock; a miss goes back to this savepoint, which drops it, before the locked path asks for the
  // pool's lock: a node held while waiting for its pool would break the lock order
  // (docs/decisions/transient-conflicts.md). Sent with the pick, it costs no round trip.
  await db.executeQuery(CompiledQuery.raw(sentWithCommit('savepoint fast_reserve'), []));
  const missed = () => sql`rollback to savepoint fast_reserve`.execute(db);
  if (!input.projectId) {
    // The common reserve checks the pool in its one read (see reserveFast); when it does not apply,
    // the checks below run and say why.
    const fast = await reserveFast(ctx, db, input.poolId, terms, ctx.now(), instanceId, true);
    if (fast) return fast;
    await missed();
  }
  const pool = await reservablePool(db, ctx.tenantId, input.poolId, poolClass);
  if (input.projectId) {
    const project = await db
      .selectFrom('compute.projects')
      .select(['id', 'state'])
      .where('id', '=', input.projectId)
      .where('tenant_id', '=', ctx.tenantId)
      .executeTakeFirst();
    if (!project) throw notFound('project', input.projectId);
    if (project.state !== 'active')
      throw new ComputeError('INVALID_STATE', `project ${project.id} is archived`);
  }
  const now = ctx.now();
  const fast = await reserveFast(ctx, db, pool.id, terms, now, instanceId);
  if (fast) return fast;
  await missed();
  await lockPool(db, pool.id);
  const quota = await quotaAllows(db, ctx.tenantId, pool.id, input.gpus);
  if (!quota.ok) throw quotaExceeded(ctx.tenantId, pool.id, input.gpus, quota);
  const queueAhead = await db
    .selectFrom('compute.reservations')
    .select('id')
    .where('pool_id', '=', pool.id)
    .where('state', '=', 'queued')
    .limit(1)
    .executeTakeFirst();
  const row = await db
    .insertInto('compute.reservations')
    .values({
      ...requestedColumns(ctx, pool.id, now, instanceId),
      state: 'queued',
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({
    type: 'reservation.created',
    subject: { type: 'reservation', id: row.id },
    data: {
      state: 'queued',
      poolId: pool.id,
      gpus: row.gpus,
      durationSeconds: row.duration_seconds,
      nvlink: row.nvlink,
      version: row.version,
    },
  });
  let current = row;
  if (!queueAhead) {
    const bound = await placeAndBind(db, row, now);
    if (bound) {
      const activated = await activate(db, row, now, ctx.emit, bound);
      return reservationView(activated.row, activated.binding, null);
    }
  } else {
    const started = await activateQueue(db, pool.id, now, ctx.emit);
    if (started.includes(row.id)) current = await loadReservation(db, ctx.tenantId, row.id);
  }
  if (current.state === 'queued') {
    const never = (await earliestStartAmongAll(db, input, terms)) === null;
    if (never) {
      throw new ComputeError(
        'INVALID_ARGUMENT',
        `pool ${pool.id} has no ${input.nvlink ? 'NVLink domain' : 'set of nodes'} with ${input.gpus === 1 ? '1 GPU' : `${input.gpus} GPUs`} matching this request`,
        {
          details: { field: 'gpus', poolId: pool.id, gpus: input.gpus, nvlink: input.nvlink },
          hint: 'Ask for fewer GPUs, drop --nvlink or loosen --selector; better-compute capacity shows what the pool has.',
        },
      );
    }
    ctx.emit({
      type: 'reservation.queued',
      subject: { type: 'reservation', id: row.id },
      data: { state: 'queued', poolId: pool.id, gpus: row.gpus },
    });
  }
  return viewOf(db, current);
}

/** A pool the tenant may reserve from: visible to it (NOT_FOUND), active and a gpu pool. */
export async function reservablePool(
  db: FleetDb,
  tenantId: string,
  poolId: string,
  poolClass: 'gpu' | 'vps' = 'gpu',
) {
  const { pool } = await visiblePool(db, tenantId, poolId);
  if (pool.state !== 'active')
    throw new ComputeError('INVALID_STATE', `pool ${pool.id} is archived`, {
      details: { state: pool.state },
      hint: 'An archived pool takes no new reservations; better-compute pools list shows the active ones.',
    });
  if (pool.class !== poolClass)
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `pool ${pool.id} is a ${pool.class} pool; reservations take GPUs from gpu pools`,
      { details: { field: 'poolId' } },
    );
  return pool;
}

function quotaExceeded(
  tenantId: string,
  poolId: string,
  gpus: number,
  quota: { resource?: string; limit?: number; used?: number },
): ComputeError {
  return new ComputeError(
    'QUOTA_EXCEEDED',
    `tenant ${tenantId} may hold ${quota.limit} ${quota.resource} on pool ${poolId} and holds ${quota.used}`,
    {
      details: {
        resource: quota.resource,
        limit: quota.limit,
        used: quota.used,
        requested: quota.resource === 'gpus' ? gpus : 1,
      },
      hint: 'Release a reservation, or ask the pool’s owner for more (quotas set).',
    },
  );
}

/**
 * The common reserve without the pool's lock: nothing is queued, no NVLink or GPU-field selector
 * (one node holds it), no quota for the tenant on the pool, and a ready node fits. The node is taken with FOR UPDATE SKIP LOCKED, so
 * concurrent reserves spread over the best-fitting nodes instead of queueing on one lock; this path
 * never waits for the pool or a node, so it cannot join a deadlock. Undefined when it does not
 * apply; the locked path then decides (place, or queue).
 */
async function reserveFast(
  ctx: CallContext<PlacementRequest & { projectId?: string | undefined }>,
  db: FleetDb,
  poolId: string,
  terms: readonly SelectorTerm[],
  now: Date,
  instanceId: string | null,
  /** Whether the read also checks the pool (visible to the tenant, active, a gpu pool). */
  checkPool = false,
): Promise<ReservationView | undefined> {
  const { input } = ctx;
  if (input.nvlink || terms.some((t) => t.field !== null)) return undefined;
  // The pick: nothing queued in the pool and no quota for the tenant on it (a tenant with a quota
  // takes the locked path, where its holdings are counted consistently), and the best-fitting ready
  // node taken with FOR UPDATE SKIP LOCKED. Its columns are the newest version (read under the
  // lock); the subqueries read the statement's snapshot, which may be older: the node's groups are
  // used only when the node's inventory revision is the same in both, and there is one group
  // (whose free count is then the node's, read under the lock). The GPU count is read through a
  // subquery so the planner estimates the same with or without its value, and the prepared statement
  // keeps one generic plan instead of planning every reserve (docs/decisions/prepared-statements.md).
  const pick = sql`
      select n.id, n.seq, n.free_gpus, n.inventory_revision,
        (select s.inventory_revision from compute.nodes s where s.id = n.id) as seen_revision,
        (select array_agg(g.group_no) from compute.gpu_groups g where g.node_id = n.id) as groups
      from compute.nodes n
      where n.pool_id = ${poolId} and n.state = 'ready' and n.free_gpus >= (select ${input.gpus}::int)
        and ${filterSql(terms, input.tolerations)}
        and not exists (select 1 from compute.reservations q where q.pool_id = ${poolId} and q.state = 'queued')
        and not exists (select 1 from compute.quotas x where x.tenant_id = ${ctx.tenantId} and x.pool_id = ${poolId} and x.limit_value is not null)
        ${
          checkPool
            ? sql`and exists (
                select 1 from compute.pools p
                where p.id = ${poolId} and p.state = 'active' and p.class = 'gpu'
                  and (p.tenant_id = ${ctx.tenantId} or exists (
                    select 1 from compute.pool_offers o where o.pool_id = p.id and o.tenant_id = ${ctx.tenantId})))`
            : sql``
        }
      order by ${bestFitNodeOrder}
      limit 1
      for update of n skip locked`;
  const endsAt = instanceId ? null : new Date(now.getTime() + input.durationSeconds * 1000);
  const insert: NewReservation = {
    ...requestedColumns(ctx, poolId, now, instanceId),
    state: 'active',
    activated_at: now,
    ends_at: endsAt,
    // Created (version 1) and activated (version 2) by one statement; both events are told.
    version: 2,
  };
  // The common node, one GPU group, is picked and bound by one statement: one round trip fewer, and
  // the node's lock is held from the pick to the commit without a round trip in between. A node of
  // several groups writes nothing there but stays locked, and the statement says which node it
  // picked: its groups are then placed. No node picked: the locked path decides.
  let written = await writeBinding(
    db,
    insert,
    {
      pick: sql`pick as (${pick})`,
      rows: sql`select p.id, p.groups[1], (select ${input.gpus}::int) from pick p
        where cardinality(p.groups) = 1 and p.seen_revision = p.inventory_revision`,
      gpus: input.gpus,
    },
    now,
    insert,
  );
  if (!written.row) {
    if (!written.pickedNode) return undefined;
    const groups = await groupsQuery(db, poolId, filterSql(terms, input.tolerations))
      .where('g.node_id', '=', written.pickedNode)
      .orderBy('g.group_no')
      .execute();
    const allocations = place(toFree(groups), input.gpus, false);
    if (!allocations) return undefined;
    written = await writeBinding(db, insert, { allocations }, now, insert);
  }
  const { bindings, row } = written;
  if (!row) throw new ComputeError('INTERNAL', `reservation ${insert.id} was not written`);
  ctx.emit({
    type: 'reservation.created',
    subject: { type: 'reservation', id: row.id },
    data: {
      state: 'queued',
      poolId,
      gpus: row.gpus,
      durationSeconds: row.duration_seconds,
      nvlink: row.nvlink,
      version: 1,
    },
  });
  const binding = boundViews(bindings, 'ready');
  emitActivated(row, endsAt, binding, row.version, ctx.emit);
  return reservationView(row, binding, null);
}

/** Whether the request could ever fit on the pool's nodes that may take work again (every state but retired). */
export async function earliestStartAmongAll(
  db: FleetDb,
  request: PlacementRequest,
  terms: readonly SelectorTerm[],
): Promise<true | null> {
  const rows = await db
    .selectFrom('compute.gpu_groups as g')
    .innerJoin('compute.nodes as n', 'n.id', 'g.node_id')
    .select(['g.node_id', 'n.seq', 'g.group_no', 'g.nvlink_domain', 'g.total as free'])
    .where('g.pool_id', '=', request.poolId)
    .where('n.state', 'not in', ['retired'])
    // Taints are left out: they come and go, and a tainted pool may take the request later.
    .where(filterSql(terms, null))
    .execute();
  return place(toFree(rows), request.gpus, request.nvlink) ? true : null;
}
