/**
 * The node sessions the gateway holds (compute.node_sessions, migration 0001 of this module): which
 * gateway replica a node's daemon is connected to, what it said it can do in its Hello, and when it
 * was last heard. The gateway writes them; the tunnels and the gateway's stream routing read them
 * here. Placement reads the capabilities with the nodes in one statement, as the shared kernel
 * docs/architecture.md names.
 */
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { commandsDb } from './tables.js';

/** What a connected daemon's Hello or heartbeat tells the gateway. */
export interface SessionReport {
  nodeId: string;
  tenantId: string;
  /** The gateway replica holding the session. */
  gatewayId: string;
  at: Date;
  /** Only in a Hello: the daemon's version and capabilities (a new session's start). */
  hello?: { version: string; capabilities: readonly string[] };
  hardware?: Record<string, unknown> | undefined;
}

/** Records a Hello (the session starts, on this replica) or a heartbeat (it is still there). */
export async function recordNodeSession(db: Kysely<ComputeTables>, report: SessionReport): Promise<void> {
  const { at, hello, hardware } = report;
  const values = {
    last_seen_at: at,
    ...(hello
      ? {
          daemon_version: hello.version,
          capabilities: JSON.stringify(hello.capabilities),
          connected_at: at,
          gateway_id: report.gatewayId,
        }
      : {}),
    ...(hardware ? { hardware: JSON.stringify(hardware) } : {}),
  };
  await commandsDb(db)
    .insertInto('compute.node_sessions')
    .values({
      node_id: report.nodeId,
      tenant_id: report.tenantId,
      gateway_id: report.gatewayId,
      daemon_version: hello ? hello.version : 'unknown',
      capabilities: JSON.stringify(hello ? hello.capabilities : []),
      hardware: JSON.stringify(hardware ?? {}),
      connected_at: at,
      last_seen_at: at,
    })
    .onConflict((oc) => oc.column('node_id').doUpdateSet(values))
    .execute();
}

/**
 * A node's session: the replica that holds it and the capabilities its daemon said it has (the
 * stored array as it is, [] when it is not one); null when the daemon never connected.
 */
export async function nodeSession(
  db: Kysely<ComputeTables>,
  nodeId: string,
): Promise<{ gatewayId: string; capabilities: unknown[] } | null> {
  const row = await commandsDb(db)
    .selectFrom('compute.node_sessions')
    .select(['gateway_id', 'capabilities'])
    .where('node_id', '=', nodeId)
    .executeTakeFirst();
  if (!row) return null;
  const value: unknown =
    typeof row.capabilities === 'string' ? JSON.parse(row.capabilities) : row.capabilities;
  return { gatewayId: row.gateway_id, capabilities: Array.isArray(value) ? value : [] };
}
