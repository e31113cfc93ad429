/** The gateway replicas table (migrations.ts): where each live replica is. */
import { type Kysely, sql } from 'kysely';

/** A replica stamps itself this often; one not seen for three stamps is taken for dead. */
export const REPLICA_STAMP_MS = 10_000;
const REPLICA_DEAD_MS = 3 * REPLICA_STAMP_MS;

type Db = Kysely<unknown>;

export async function stampReplica(db: Db, id: string, url: string, now: Date): Promise<void> {
  await sql`
    insert into compute.gateway_replicas (id, url, started_at, last_seen_at)
    values (${id}, ${url}, ${now}, ${now})
    on conflict (id) do update set url = excluded.url, last_seen_at = excluded.last_seen_at`.execute(db);
}

export async function removeReplica(db: Db, id: string): Promise<void> {
  await sql`delete from compute.gateway_replicas where id = ${id}`.execute(db);
}

/** Live replicas' URLs, oldest first (a stable order, so daemons spread the same way). */
export async function liveReplicaUrls(db: Db, now: Date): Promise<string[]> {
  const since = new Date(now.getTime() - REPLICA_DEAD_MS);
  const rows = await sql<{ url: string }>`
    select url from compute.gateway_replicas where last_seen_at >= ${since}
    order by started_at, id`.execute(db);
  return [...new Set(rows.rows.map((row) => row.url))];
}

/** Where a node's session is: the replica recorded at its hello, if that replica is alive. */
export async function sessionLocation(
  db: Db,
  nodeId: string,
  now: Date,
): Promise<{ gatewayId: string; url: string | null; capabilities: string[] } | null> {
  const since = new Date(now.getTime() - REPLICA_DEAD_MS);
  const rows = await sql<{ gateway_id: string; url: string | null; capabilities: unknown }>`
    select s.gateway_id, r.url, s.capabilities
    from compute.node_sessions s
    left join compute.gateway_replicas r on r.id = s.gateway_id and r.last_seen_at >= ${since}
    where s.node_id = ${nodeId}`.execute(db);
  const row = rows.rows[0];
  if (!row) return null;
  const capabilities = typeof row.capabilities === 'string' ? JSON.parse(row.capabilities) : row.capabilities;
  return {
    gatewayId: row.gateway_id,
    url: row.url,
    capabilities: Array.isArray(capabilities) ? capabilities.map(String) : [],
  };
}
