/**
 * Where an instance goes and whether the tenant may have it: a ready node of the pool with room
 * for its vCPUs and memory (every instance not deleted, and every live sandbox, holds its shape on
 * its node), and the tenant's instance quotas on the pool. Both read under the pool's lock (fleet/locks.ts), which
 * every create, resize and delete of the pool takes, so concurrent creates see each other.
 */
import { ComputeError } from '@better-compute/core';
import { sql } from 'kysely';
import type { VpsDb } from './tables.js';

export interface Shape {
  vcpus: number;
  memoryMiB: number;
}

export interface NodeRoom {
  nodeId: string;
  freeVcpus: number;
  freeMemoryMiB: number;
}

/** The ready nodes of the pool with what they have left, fullest first (instances pack tightly). */
export async function roomOnNodes(db: VpsDb, poolId: string, onlyNode?: string): Promise<NodeRoom[]> {
  const rows = await sql<{ id: string; free_vcpus: number; free_memory: number }>`
    select n.id,
      n.cpu_cores - coalesce(sum(i.vcpus), 0)::int as free_vcpus,
      n.memory_gib * 1024 - coalesce(sum(i.memory_mib), 0)::int as free_memory
    from compute.nodes n
    left join (
      select node_id, vcpus, memory_mib from compute.instances where state <> 'deleted'
      -- Sandboxes hold their flavor's shape on their node too (modules/sandboxes).
      union all
      select node_id, vcpus, memory_mib from compute.sandboxes where state not in ('deleted', 'failed')
    ) i on i.node_id = n.id
    where n.pool_id = ${poolId} and n.state = 'ready'
      ${onlyNode ? sql`and n.id = ${onlyNode}` : sql``}
    group by n.id, n.seq
    order by free_vcpus, free_memory, n.seq`.execute(db);
  return rows.rows.map((r) => ({
    nodeId: r.id,
    freeVcpus: Number(r.free_vcpus),
    freeMemoryMiB: Number(r.free_memory),
  }));
}

export function fits(room: NodeRoom, shape: Shape): boolean {
  return room.freeVcpus >= shape.vcpus && room.freeMemoryMiB >= shape.memoryMiB;
}

export function noRoom(poolId: string, shape: Shape, onNode?: string): ComputeError {
  return new ComputeError(
    'UNAVAILABLE',
    `no ready node of pool ${poolId}${onNode ? ` (the node holding the flavor's GPUs, ${onNode})` : ''} has room for ${shape.vcpus} vCPU(s) and ${shape.memoryMiB} MiB`,
    {
      details: { poolId, vcpus: shape.vcpus, memoryMiB: shape.memoryMiB },
      hint: 'Pick a smaller flavor, delete an instance of the pool, or retry when the pool has grown.',
    },
  );
}
