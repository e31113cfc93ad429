/** `capacity.get` and `capacity.preview`: what a pool holds, and where a request would fit now. */
import { sql } from 'kysely';
import type { CallContext } from '../../define-module.js';
import { iso, notFound } from '../common.js';
import { fleetDb } from '../tables.js';
import { type PlacementRequest, findPlacement } from './placement-sql.js';
import { earliestStart, queueHeadStart } from './queue.js';
import { earliestStartAmongAll, reservablePool } from './reserve.js';
import { requestTerms } from './selector.js';
import { boundViews } from './views.js';

export async function getCapacity(ctx: CallContext<{ poolId?: string | undefined }>) {
  const db = fleetDb(ctx.db);
  // One statement (raw SQL: Kysely has no builder for the nested aggregate): the pools the tenant
  // owns or is offered, one pass over their groups' counters (one narrow row per node and product,
  // carrying the node's state: never the GPUs or reservations) and their queues.
  const poolFilter = ctx.input.poolId ? sql`and p.id = ${ctx.input.poolId}` : sql``;
  // GPUs count as free where a request could be placed now. An archived pool takes no new work,
  // nor does a node whose reported inventory waits to be put in use (it carries compute's
  // inventory-pending taint, which nothing tolerates), so their free GPUs count as unavailable.
  // Those nodes are few: `waiting` finds them by a partial index and holds them in one array (a
  // join with them cost a hash of every group, +50 % on this statement). A node its operator
  // tainted keeps its free GPUs free: a request that tolerates the taint may use them. An archived
  // pool is listed while it still has GPUs (running reservations run to their end there), and
  // always when asked for.
  const archivedShown = ctx.input.poolId
    ? sql`true`
    : sql`exists (select 1 from compute.gpu_groups a where a.pool_id = p.id and a.node_state <> 'retired')`;
  const rows = (
    await sql<{
      id: string;
      name: string;
      class: string;
      models:
        { gpuModel: string; total: number; reserved: number; free: number; unavailable: number }[] | string;
      queued_n: number;
      queued_gpus: number;
    }>`
      with p as (
        select p.id, p.name, p.class, p.state = 'active' as active from compute.pools p
        where (p.state = 'active' or ${archivedShown})
          and (p.tenant_id = ${ctx.tenantId}
               or p.id in (select o.pool_id from compute.pool_offers o where o.tenant_id = ${ctx.tenantId}))
          ${poolFilter}),
      waiting as (
        select coalesce(array_agg(n.id), '{}') as ids from compute.nodes n
        where n.reported_revision <> n.inventory_revision and n.pool_id in (select id from p)),
      c as (
        select g.pool_id, g.model,
          sum(g.total)::int as total,
          sum(g.total - g.free)::int as reserved,
          coalesce(sum(g.free) filter (where g.node_state = 'ready' and p.active and g.node_id <> all(w.ids)), 0)::int as free,
          coalesce(sum(g.free) filter (where g.node_state <> 'ready' or not p.active or g.node_id = any(w.ids)), 0)::int
            as unavailable
        from compute.gpu_groups g join p on p.id = g.pool_id cross join waiting w
        where g.node_state <> 'retired'
        group by g.pool_id, g.model),
      q as (
        select pool_id, count(*)::int as n, coalesce(sum(gpus), 0)::int as gpus
        from compute.reservations
        where pool_id in (select id from p) and state = 'queued'
        group by pool_id)
      select p.id, p.name, p.class,
        (select coalesce(jsonb_agg(jsonb_build_object('gpuModel', c.model, 'total', c.total,
            'reserved', c.reserved, 'free', c.free, 'unavailable', c.unavailable) order by c.model), '[]'::jsonb)
         from c where c.pool_id = p.id) as models,
        coalesce(q.n, 0) as queued_n, coalesce(q.gpus, 0) as queued_gpus
      from p left join q on q.pool_id = p.id
      order by p.id`.execute(db)
  ).rows;
  if (ctx.input.poolId && rows.length === 0) throw notFound('pool', ctx.input.poolId);
  return {
    items: rows.map((pool) => {
      const models = (typeof pool.models === 'string' ? JSON.parse(pool.models) : pool.models) as {
        gpuModel: string;
        total: number;
        reserved: number;
        free: number;
        unavailable: number;
      }[];
      const sum = (key: 'total' | 'reserved' | 'free' | 'unavailable') =>
        models.reduce((s, m) => s + m[key], 0);
      return {
        poolId: pool.id,
        name: pool.name,
        class: pool.class,
        total: sum('total'),
        reserved: sum('reserved'),
        free: sum('free'),
        unavailable: sum('unavailable'),
        queuedReservations: Number(pool.queued_n),
        queuedGpus: Number(pool.queued_gpus),
        models,
      };
    }),
    nextCursor: null,
  };
}

export async function previewCapacity(ctx: CallContext<PlacementRequest>) {
  const db = fleetDb(ctx.db);
  const { input } = ctx;
  const terms = requestTerms(input);
  const pool = await reservablePool(db, ctx.tenantId, input.poolId);
  const now = ctx.now();
  const queued = await db
    .selectFrom('compute.reservations')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('pool_id', '=', pool.id)
    .where('state', '=', 'queued')
    .executeTakeFirstOrThrow();
  const allocations = await findPlacement(db, input, terms);
  // With a queue, a reserve that fits starts now only if it ends by the head's start (EASY
  // backfill, as activateQueue decides); otherwise it queues behind them, and it cannot start
  // before the head does.
  const headStart = queued.n > 0 && allocations ? await queueHeadStart(db, pool.id, now) : null;
  if (headStart !== null && now.getTime() + input.durationSeconds * 1000 > headStart) {
    return {
      fits: false,
      placement: null,
      earliestStartAt: iso(new Date(headStart)),
      queuedAhead: queued.n,
      reason: `${queued.n} reservation(s) are queued ahead and the first can start at ${iso(new Date(headStart))}; this request would run past that, so it queues behind them and starts no earlier (a request that ends by then starts now)`,
    };
  }
  if (allocations) {
    const groups = await db
      .selectFrom('compute.gpu_groups')
      .select(['node_id', 'group_no', 'model', 'product', 'nvlink_domain', 'gpu_indices', 'holders'])
      .where('node_id', 'in', [...new Set(allocations.map((a) => a.nodeId))])
      .execute();
    // The GPUs a reserve would take: each group's first empty slots, as writeBinding picks them.
    const chosen = allocations.map((a) => {
      const group = groups.find((g) => g.node_id === a.nodeId && g.group_no === a.groupNo)!;
      return {
        ...group,
        gpu_indices: group.gpu_indices.filter((_, i) => group.holders[i] === null).slice(0, a.count),
      };
    });
    const placement = boundViews(chosen, 'ready').map(({ nodeState: _state, ...view }) => view);
    return {
      fits: true,
      placement,
      earliestStartAt: iso(now),
      queuedAhead: queued.n,
      reason:
        queued.n > 0
          ? `${queued.n} reservation(s) are queued ahead; a reserve starts now only if it ends before the head of the queue can start`
          : null,
    };
  }
  const at = await earliestStart(db, input, terms, now);
  const ever = await earliestStartAmongAll(db, input, terms);
  return {
    fits: false,
    placement: null,
    earliestStartAt: at ? iso(at) : null,
    queuedAhead: queued.n,
    reason:
      ever === null
        ? `the pool has no ${input.nvlink ? 'NVLink domain' : 'set of nodes'} with ${input.gpus} matching GPU${input.gpus === 1 ? '' : 's'}`
        : at
          ? 'not enough matching GPUs are free now; the earliest start counts only reservations running now, not the queue'
          : 'the matching GPUs are on nodes that take no new work now (cordoned, draining, offline)',
  };
}
