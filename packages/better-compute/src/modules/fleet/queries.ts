/**
 * What other parts of the server read of the fleet's tables, so none of them queries a fleet table
 * itself (docs/architecture.md, "Who queries which table"). Each function takes the caller's
 * handle, a transaction included, and reads one thing; the caller decides what a missing row means.
 */
import { type Kysely, sql } from 'kysely';
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

/** A site as fleet configuration reads it: its fields and version, and how many pools it has had. */
export interface PlatformSite {
  id: string;
  name: string;
  region: string | null;
  description: string;
  labels: Record<string, string>;
  version: number;
  /** Pools at the site, archived ones included: a site that has had one is never deleted. */
  pools: number;
}

/** A pool as fleet configuration reads it, with its offers (accepted and pending) and quota rows. */
export interface PlatformPool {
  id: string;
  siteId: string;
  name: string;
  class: 'gpu' | 'vps' | 'metal';
  driver: string;
  state: 'active' | 'archived';
  description: string;
  labels: Record<string, string>;
  version: number;
  /** Tenants offered the pool, accepted or not, sorted. */
  offers: string[];
  /** Every quota row, a cleared one (limit null) included: its version goes on counting. */
  quotas: { tenantId: string; resource: 'gpus' | 'reservations'; limit: number | null; version: number }[];
}

/**
 * A tenant's sites and pools (archived ones too) with their offers and quotas, in four statements
 * whatever their number: what `fleet.export` and `fleet.plan` compare a document with.
 */
export async function platformObjects(
  db: Kysely<ComputeTables>,
  tenantId: string,
): Promise<{ sites: PlatformSite[]; pools: PlatformPool[] }> {
  const fleet = fleetDb(db);
  const ownPools = fleet.selectFrom('compute.pools').select('id').where('tenant_id', '=', tenantId);
  const [sites, pools, accepted, pending, quotas] = await Promise.all([
    fleet.selectFrom('compute.sites').selectAll().where('tenant_id', '=', tenantId).orderBy('id').execute(),
    fleet.selectFrom('compute.pools').selectAll().where('tenant_id', '=', tenantId).orderBy('id').execute(),
    fleet
      .selectFrom('compute.pool_offers')
      .select(['pool_id', 'tenant_id'])
      .where('pool_id', 'in', ownPools)
      .execute(),
    fleet
      .selectFrom('compute.pending_offers')
      .select(['pool_id', 'tenant_id'])
      .where('pool_id', 'in', ownPools)
      .execute(),
    fleet
      .selectFrom('compute.quotas')
      .select(['pool_id', 'tenant_id', 'resource', 'limit_value', 'version'])
      .where('pool_id', 'in', ownPools)
      .execute(),
  ]);
  const byPool = new Map<string, PlatformPool>();
  const poolsAt = new Map<string, number>();
  const result: PlatformPool[] = pools.map((row) => {
    const pool: PlatformPool = {
      id: row.id,
      siteId: row.site_id,
      name: row.name,
      class: row.class,
      driver: row.driver,
      state: row.state,
      description: row.description,
      labels: row.labels,
      version: row.version,
      offers: [],
      quotas: [],
    };
    byPool.set(row.id, pool);
    poolsAt.set(row.site_id, (poolsAt.get(row.site_id) ?? 0) + 1);
    return pool;
  });
  for (const offer of [...accepted, ...pending]) byPool.get(offer.pool_id)?.offers.push(offer.tenant_id);
  for (const quota of quotas)
    byPool.get(quota.pool_id)?.quotas.push({
      tenantId: quota.tenant_id,
      resource: quota.resource,
      limit: quota.limit_value === null ? null : Number(quota.limit_value),
      version: quota.version,
    });
  for (const pool of result) {
    pool.offers = [...new Set(pool.offers)].sort();
    pool.quotas.sort((a, b) =>
      a.tenantId === b.tenantId ? (a.resource < b.resource ? -1 : 1) : a.tenantId < b.tenantId ? -1 : 1,
    );
  }
  return {
    sites: sites.map((row) => ({
      id: row.id,
      name: row.name,
      region: row.region,
      description: row.description,
      labels: row.labels,
      version: row.version,
      pools: poolsAt.get(row.id) ?? 0,
    })),
    pools: result,
  };
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

/** Whether the tenant has this site (another tenant's is answered as no site at all). */
export async function tenantHasSite(
  db: Kysely<ComputeTables>,
  tenantId: string,
  siteId: string,
): Promise<boolean> {
  const row = await fleetDb(db)
    .selectFrom('compute.sites')
    .select('id')
    .where('id', '=', siteId)
    .where('tenant_id', '=', tenantId)
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * The site's agent that runs its BMC commands (the metal module): a ready node joined with a site
 * token in a pool of the site and the tenant, the one heard from last; null when there is none.
 */
export async function readySiteAgent(
  db: Kysely<ComputeTables>,
  tenantId: string,
  siteId: string,
): Promise<string | null> {
  const row = await fleetDb(db)
    .selectFrom('compute.nodes as n')
    .innerJoin('compute.pools as p', 'p.id', 'n.pool_id')
    .select('n.id')
    .where('p.site_id', '=', siteId)
    .where('n.tenant_id', '=', tenantId)
    .where('n.role', '=', 'site-agent')
    .where('n.state', '=', 'ready')
    .orderBy(sql`n.last_heartbeat_at desc nulls last`)
    .orderBy('n.id')
    .limit(1)
    .executeTakeFirst();
  return row?.id ?? null;
}

/** Whether the node is a site agent of the site in the tenant (the gateway asks before it opens a BMC password). */
export async function isSiteAgentOf(
  db: Kysely<ComputeTables>,
  nodeId: string,
  tenantId: string,
  siteId: string,
): Promise<boolean> {
  const row = await fleetDb(db)
    .selectFrom('compute.nodes as n')
    .innerJoin('compute.pools as p', 'p.id', 'n.pool_id')
    .select('n.id')
    .where('n.id', '=', nodeId)
    .where('n.tenant_id', '=', tenantId)
    .where('n.role', '=', 'site-agent')
    .where('p.site_id', '=', siteId)
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * The tenant and site a node is the site agent of, or null when it is not a site agent (the
 * gateway asks before it records what the node's provisioning network saw).
 */
export async function siteOfSiteAgent(
  db: Kysely<ComputeTables>,
  nodeId: string,
): Promise<{ tenantId: string; siteId: string } | null> {
  const row = await fleetDb(db)
    .selectFrom('compute.nodes as n')
    .innerJoin('compute.pools as p', 'p.id', 'n.pool_id')
    .select(['n.tenant_id', 'p.site_id'])
    .where('n.id', '=', nodeId)
    .where('n.role', '=', 'site-agent')
    .executeTakeFirst();
  return row ? { tenantId: row.tenant_id, siteId: row.site_id } : null;
}

/** The site agents of a site in the tenant that are not retired, by id. */
export async function siteAgentsOf(
  db: Kysely<ComputeTables>,
  tenantId: string,
  siteId: string,
): Promise<string[]> {
  const rows = await fleetDb(db)
    .selectFrom('compute.nodes as n')
    .innerJoin('compute.pools as p', 'p.id', 'n.pool_id')
    .select('n.id')
    .where('p.site_id', '=', siteId)
    .where('n.tenant_id', '=', tenantId)
    .where('n.role', '=', 'site-agent')
    .where('n.state', '<>', 'retired')
    .orderBy('n.id')
    .execute();
  return rows.map((row) => row.id);
}
