/**
 * Placement in SQL: the best-fit rule of placement.ts (`place`) asked of the pool's GPU groups and
 * nodes, so a reserve reads the few rows that can hold it instead of the whole pool. The query picks
 * the node (or NVLink domain) with the fewest free GPUs that fit; `place` then allocates within it,
 * so both forms give the same answer (test/best-fit.test.ts and the reservation property test).
 */
import { type RawBuilder, sql } from 'kysely';
import type { FleetDb } from '../tables.js';
import { type Allocation, type FreeGroup, place } from './placement.js';
import type { SelectorTerm } from './selector.js';

export interface PlacementRequest {
  poolId: string;
  gpus: number;
  durationSeconds: number;
  nvlink: boolean;
  selector?: string | null | undefined;
  gpuModel?: string | null | undefined;
  gpuProduct?: string | null | undefined;
  tolerations: readonly string[];
}

/**
 * Best fit's order of whole nodes, in SQL (placement.ts's `place` in TypeScript): the fewest free
 * GPUs that still fit first, then join order. The one definition both findPlacement and the fast
 * reserve's single statement use; test/best-fit.test.ts holds all three forms to the same answers.
 */
export const bestFitNodeOrder = sql`n.free_gpus, n.seq`;

const NUMERIC_OPS = new Set(['>=', '<=', '>', '<']);
function termSql(term: SelectorTerm): RawBuilder<boolean> {
  const column =
    term.field === 'gpuModel'
      ? sql.ref('g.model')
      : term.field === 'gpuProduct'
        ? sql.ref('g.product')
        : term.field === 'vramGiB'
          ? sql.ref('g.vram_gib')
          : null;
  if (term.field === 'vramGiB') {
    const values = term.values.map(Number);
    switch (term.operator) {
      case 'in':
        return sql<boolean>`${column} in (${sql.join(values)})`;
      case 'notin':
        return sql<boolean>`${column} not in (${sql.join(values)})`;
      case '!=':
        return sql<boolean>`${column} <> ${values[0]}`;
      default:
        // The operator comes from the parser's closed set.
        return sql<boolean>`${column} ${sql.raw(term.operator)} ${values[0]}`;
    }
  }
  // Raw SQL: jsonb ->> has no Kysely builder; a missing label is NULL, which = and in never match.
  const actual = column ?? sql<string>`(n.labels ->> ${term.key})`;
  switch (term.operator) {
    case '=':
      return sql<boolean>`${actual} = ${term.values[0]}`;
    case '!=':
      return sql<boolean>`${actual} is distinct from ${term.values[0]}`;
    case 'in':
      return sql<boolean>`${actual} in (${sql.join(term.values)})`;
    case 'notin':
      return sql<boolean>`coalesce(${actual} not in (${sql.join(term.values)}), true)`;
    default:
      if (!NUMERIC_OPS.has(term.operator)) throw new Error(`unknown operator ${term.operator}`);
      return sql<boolean>`(case when ${actual} ~ '^-?[0-9]+(\\.[0-9]+)?$' then (${actual})::numeric ${sql.raw(term.operator)} ${Number(term.values[0])} else false end)`;
  }
}

/** The request's filter over `g` (gpu_groups) and `n` (nodes): its terms and the nodes' NoSchedule taints. */
export function filterSql(
  terms: readonly SelectorTerm[],
  tolerations: readonly string[] | null,
): RawBuilder<boolean> {
  const taints =
    tolerations === null
      ? sql<boolean>`true`
      : tolerations.length === 0
        ? sql<boolean>`cardinality(n.no_schedule) = 0`
        : sql<boolean>`(cardinality(n.no_schedule) = 0 or n.no_schedule <@ ${sql.val([...tolerations])}::text[])`;
  return sql.join([taints, ...terms.map(termSql)], sql` and `) as RawBuilder<boolean>;
}

export function groupsQuery(db: FleetDb, poolId: string, filter: RawBuilder<boolean>) {
  return db
    .selectFrom('compute.gpu_groups as g')
    .innerJoin('compute.nodes as n', 'n.id', 'g.node_id')
    .select(['g.node_id', 'n.seq', 'g.group_no', 'g.nvlink_domain', 'g.free'])
    .where('g.pool_id', '=', poolId)
    .where('n.state', '=', 'ready')
    .where('g.free', '>', 0)
    .where(filter);
}

export const toFree = (
  rows: { node_id: string; seq: number; group_no: number; nvlink_domain: string | null; free: number }[],
): FreeGroup[] =>
  rows.map((r) => ({
    nodeId: r.node_id,
    nodeSeq: Number(r.seq),
    groupNo: r.group_no,
    nvlinkDomain: r.nvlink_domain,
    free: r.free,
  }));

/** Where the request fits now on the pool's ready nodes, or null. Reads; binds nothing. */
export async function findPlacement(
  db: FleetDb,
  request: PlacementRequest,
  terms: readonly SelectorTerm[],
): Promise<Allocation[] | null> {
  const filter = filterSql(terms, request.tolerations);
  const { poolId, gpus } = request;
  if (!request.nvlink) {
    const gpuFields = terms.some((t) => t.field !== null);
    let nodeId: string | undefined;
    if (!gpuFields) {
      // The common case reads one row of the nodes_fit index: the ready node with the fewest free GPUs that fit.
      const row = await db
        .selectFrom('compute.nodes as n')
        .select('n.id')
        .where('n.pool_id', '=', poolId)
        .where('n.state', '=', 'ready')
        .where('n.free_gpus', '>=', gpus)
        .where(filterSql(terms, request.tolerations))
        .orderBy(bestFitNodeOrder)
        .limit(1)
        .executeTakeFirst();
      nodeId = row?.id;
    } else {
      const row = await db
        .selectFrom('compute.gpu_groups as g')
        .innerJoin('compute.nodes as n', 'n.id', 'g.node_id')
        .select(['g.node_id', sql<number>`min(n.seq)`.as('seq'), sql<number>`sum(g.free)::int`.as('free')])
        .where('g.pool_id', '=', poolId)
        .where('n.state', '=', 'ready')
        .where('g.free', '>', 0)
        .where(filter)
        .groupBy('g.node_id')
        .having(sql`sum(g.free)`, '>=', gpus)
        .orderBy(sql`sum(g.free)`)
        .orderBy(sql`min(n.seq)`)
        .limit(1)
        .executeTakeFirst();
      nodeId = row?.node_id;
    }
    if (nodeId) {
      const groups = await groupsQuery(db, poolId, filter)
        .where('g.node_id', '=', nodeId)
        .orderBy('g.group_no')
        .execute();
      const fit = place(toFree(groups), gpus, false);
      if (fit) return fit;
    }
    const all = await groupsQuery(db, poolId, filter).orderBy('n.seq').orderBy('g.group_no').execute();
    return place(toFree(all), gpus, false);
  }
  const domain = await db
    .selectFrom('compute.gpu_groups as g')
    .innerJoin('compute.nodes as n', 'n.id', 'g.node_id')
    .select(['g.nvlink_domain', sql<number>`sum(g.free)::int`.as('free')])
    .where('g.pool_id', '=', poolId)
    .where('n.state', '=', 'ready')
    .where('g.free', '>', 0)
    .where('g.nvlink_domain', 'is not', null)
    .where(filter)
    .groupBy('g.nvlink_domain')
    .having(sql`sum(g.free)`, '>=', gpus)
    .orderBy(sql`sum(g.free)`)
    .orderBy('g.nvlink_domain')
    .limit(1)
    .executeTakeFirst();
  if (!domain?.nvlink_domain) return null;
  const groups = await groupsQuery(db, poolId, filter)
    .where('g.nvlink_domain', '=', domain.nvlink_domain)
    .orderBy('n.seq')
    .orderBy('g.group_no')
    .execute();
  return place(toFree(groups), gpus, true);
}
