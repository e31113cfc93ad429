/**
 * What other parts of the server read of the fleet's tables, so none of them queries a fleet table
 * itself (docs/architecture.md, "Who queries which table"). Each function takes the caller's
 * handle, a transaction included, and reads one thing; the caller decides what a missing row means.
 */
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { fleetDb, type NodeState } from './tables.js';

/** A node's tenant, state and pool; with `tenantId`, only a node of that tenant. */
export async function findNode(
  db: Kysely<ComputeTables>,
  nodeId: string,
  tenantId?: string,
): Promise<{ id: string; tenant_id: string; state: NodeState; pool_id: string } | undefined> {
  let query = fleetDb(db)
    .selectFrom('compute.nodes')
    .select(['id', 'tenant_id', 'state', 'pool_id'])
    .where('id', '=', nodeId);
  if (tenantId !== undefined) query = query.where('tenant_id', '=', tenantId);
  return query.executeTakeFirst();
}

/** The tenant a node belongs to, for a node the caller knows exists (it throws otherwise). */
export async function nodeTenant(db: Kysely<ComputeTables>, nodeId: string): Promise<string> {
  const node = await fleetDb(db)
    .selectFrom('compute.nodes')
    .select('tenant_id')
    .where('id', '=', nodeId)
    .executeTakeFirstOrThrow();
  return node.tenant_id;
}

/** A node's labels and its pool's driver (`sim` for a simulated node). */
export async function nodeWithDriver(
  db: Kysely<ComputeTables>,
  nodeId: string,
): Promise<{ id: string; labels: Record<string, string>; driver: string } | undefined> {
  return fleetDb(db)
    .selectFrom('compute.nodes as n')
    .innerJoin('compute.pools as p', 'p.id', 'n.pool_id')
    .select(['n.id', 'n.labels', 'p.driver'])
    .where('n.id', '=', nodeId)
    .executeTakeFirst();
}

/** A pool's driver, or undefined when there is no such pool. */
export async function poolDriver(db: Kysely<ComputeTables>, poolId: string): Promise<string | undefined> {
  const pool = await fleetDb(db)
    .selectFrom('compute.pools')
    .select('driver')
    .where('id', '=', poolId)
    .executeTakeFirst();
  return pool?.driver;
}

/** The indices of the GPUs a reservation holds now, on its node, in binding order. */
export async function boundGpuIndices(db: Kysely<ComputeTables>, reservationId: string): Promise<number[]> {
  const bindings = await fleetDb(db)
    .selectFrom('compute.gpu_bindings')
    .select('gpu_indices')
    .where('reservation_id', '=', reservationId)
    .where('released_at', 'is', null)
    .execute();
  return bindings.flatMap((binding) => binding.gpu_indices);
}

/**
 * The nodes a rollout may update: of a pool, or those named (in the order named), or every node,
 * with their labels for a selector; retired and joining nodes are left out. Any tenant's: a bcd
 * release is the platform's, whoever's machine runs it.
 */
export async function nodesForRollout(
  db: Kysely<ComputeTables>,
  target: { poolId?: string | undefined; nodeIds?: readonly string[] | undefined },
): Promise<{ id: string; tenant_id: string; state: NodeState; labels: Record<string, string> }[]> {
  let query = fleetDb(db)
    .selectFrom('compute.nodes')
    .select(['id', 'tenant_id', 'state', 'labels'])
    .where('state', 'not in', ['retired', 'joining'])
    .orderBy('seq');
  if (target.poolId !== undefined) query = query.where('pool_id', '=', target.poolId);
  if (target.nodeIds !== undefined) {
    if (target.nodeIds.length === 0) return [];
    query = query.where('id', 'in', [...target.nodeIds]);
  }
  const rows = await query.execute();
  if (target.nodeIds === undefined) return rows;
  const byId = new Map(rows.map((row) => [row.id, row]));
  return target.nodeIds.flatMap((id) => (byId.has(id) ? [byId.get(id)!] : []));
}

/** Whether a pool exists. */
export async function poolExists(db: Kysely<ComputeTables>, poolId: string): Promise<boolean> {
  return (
    (await fleetDb(db)
      .selectFrom('compute.pools')
      .select('id')
      .where('id', '=', poolId)
      .executeTakeFirst()) !== undefined
  );
}
