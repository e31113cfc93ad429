/**
 * Where a sandbox or volume goes: a ready node of the pool whose runtime can run it (the daemon
 * says `runtime.bwrap` / `runtime.qemu` in its Hello; simulated nodes run both) with room for the
 * flavor's vCPUs and memory, counted with the pool's instances (vps/placement.ts).
 */
import { ComputeError } from '@better-compute/core';
import { sql, type Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { fits, noRoom, roomOnNodes, type Shape } from '../vps/placement.js';
import { vpsDb } from '../vps/tables.js';
import type { SandboxRuntime } from './tables.js';

/** The ready nodes of the pool that can run `runtime`, in placement order. */
export async function nodesRunning(
  db: Kysely<ComputeTables>,
  poolId: string,
  runtime: SandboxRuntime | null,
): Promise<string[]> {
  const rows = await sql<{ id: string }>`
    select n.id from compute.nodes n
      join compute.pools p on p.id = n.pool_id
      left join compute.node_sessions s on s.node_id = n.id
    -- A site agent (joined with a site token) holds its site's BMC passwords: it runs no sandboxes.
    where n.pool_id = ${poolId} and n.state = 'ready' and n.role = 'worker'
      and (${runtime === null} or p.driver = 'sim' or coalesce(s.capabilities, '[]'::jsonb) ? ${`runtime.${runtime ?? ''}`})
    order by n.seq`.execute(db);
  return rows.rows.map((r) => r.id);
}

/** Whether any node of the pool (ready or not) can run `runtime`: what a template is checked against. */
export async function poolRuns(
  db: Kysely<ComputeTables>,
  poolId: string,
  runtime: SandboxRuntime,
): Promise<boolean> {
  const rows = await sql<{ id: string }>`
    select n.id from compute.nodes n
      join compute.pools p on p.id = n.pool_id
      left join compute.node_sessions s on s.node_id = n.id
    where n.pool_id = ${poolId} and n.state <> 'retired' and n.role = 'worker'
      and (p.driver = 'sim' or coalesce(s.capabilities, '[]'::jsonb) ? ${`runtime.${runtime}`})
    limit 1`.execute(db);
  return rows.rows.length > 0;
}

/** The node a sandbox starts on: `onNode` when it is bound to one (its volume's, its snapshot's). */
export async function placeSandbox(
  db: Kysely<ComputeTables>,
  poolId: string,
  runtime: SandboxRuntime,
  shape: Shape,
  onNode: string | null,
): Promise<string> {
  const capable = new Set(await nodesRunning(db, poolId, runtime));
  if (onNode !== null && !capable.has(onNode))
    throw new ComputeError(
      'UNAVAILABLE',
      `node ${onNode}, which holds this sandbox's volume or snapshot, is not ready to run ${runtime} sandboxes`,
      {
        details: { nodeId: onNode, runtime },
        hint: 'Retry when the node is back (better-compute nodes get shows its state).',
      },
    );
  const rooms = (await roomOnNodes(vpsDb(db), poolId, onNode ?? undefined)).filter((r) =>
    capable.has(r.nodeId),
  );
  const room = rooms.find((r) => fits(r, shape));
  if (!room)
    throw noRoom(
      poolId,
      shape,
      rooms,
      onNode === null
        ? {}
        : { node: { nodeId: onNode, role: "the node holding the sandbox's volume or snapshot" } },
    );
  return room.nodeId;
}
