/** The gateway replicas table (migrations.ts): where each live replica is. */
import { type Kysely, sql } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import { nodeSession } from '../modules/commands/index.js';

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

/**
 * Where a node's session is: the replica recorded at its hello (the commands module keeps the
 * sessions), with that replica's URL if it is alive.
 */
export async function sessionLocation(
  db: Db,
  nodeId: string,
  now: Date,
): Promise<{ gatewayId: string; url: string | null; capabilities: string[] } | null> {
  const session = await nodeSession(db as unknown as Kysely<ComputeTables>, nodeId);
  if (!session) return null;
  const since = new Date(now.getTime() - REPLICA_DEAD_MS);
  const replica = await sql<{ url: string }>`
    select url from compute.gateway_replicas where id = ${session.gatewayId} and last_seen_at >= ${since}`.execute(
    db,
  );
  return {
    gatewayId: session.gatewayId,
    url: replica.rows[0]?.url ?? null,
    capabilities: session.capabilities.map(String),
  };
}
