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
    -- A site agent (joined with a site token) holds its site's BMC passwords: it runs no guests.
    where n.pool_id = ${poolId} and n.state = 'ready' and n.role = 'worker'
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

/** The node a placement was bound to, and why, for the refusal's words. */
export interface BoundNode {
  nodeId: string;
  /** What binds it there: `the node holding the flavor's GPUs`, `the instance's node`. */
  role: string;
}

const needs = (shape: Shape) => `${shape.vcpus} vCPU(s) and ${shape.memoryMiB} MiB of memory`;

/**
 * The refusal of a placement with no room: it names what is short (vCPUs, memory, or the two
 * together on one node) and how much the fullest node has, from the `rooms` placement looked at
 * (the pool's ready nodes, or the one node it was bound to). `shape` is what had to fit: a whole
 * instance or sandbox, or what a resize adds (`growing`).
 */
export function noRoom(
  poolId: string,
  shape: Shape,
  rooms: readonly NodeRoom[],
  options: { node?: BoundNode; growing?: boolean } = {},
): ComputeError {
  const { node, growing = false } = options;
  const need = growing
    ? `${shape.vcpus} more vCPU(s) and ${shape.memoryMiB} more MiB of memory`
    : needs(shape);
  const mostVcpus = Math.max(0, ...rooms.map((r) => r.freeVcpus));
  const mostMemory = Math.max(0, ...rooms.map((r) => r.freeMemoryMiB));
  const short: ('vcpus' | 'memory')[] = [];
  if (mostVcpus < shape.vcpus) short.push('vcpus');
  if (mostMemory < shape.memoryMiB) short.push('memory');
  const details = {
    poolId,
    vcpus: shape.vcpus,
    memoryMiB: shape.memoryMiB,
    short,
    ...(node ? { nodeId: node.nodeId } : {}),
  };
  const shortWords =
    short.length === 2
      ? 'vCPUs and memory'
      : short[0] === 'vcpus'
        ? 'vCPUs'
        : short[0] === 'memory'
          ? 'memory'
          : '';
  const smaller =
    short.length === 2 ? 'fewer vCPUs and less memory' : short[0] === 'vcpus' ? 'fewer vCPUs' : 'less memory';
  if (rooms.length === 0) {
    return new ComputeError(
      'UNAVAILABLE',
      node
        ? `${node.role}, ${node.nodeId}, is not ready, so it has no room for ${need}`
        : `pool ${poolId} has no ready node to place ${need} on`,
      {
        details: { ...details, short: [] },
        hint: `Retry when ${node ? 'the node' : 'a node of the pool'} is ready ("better-compute nodes list --pool ${poolId}" shows their states).`,
      },
    );
  }
  const free = (room: NodeRoom) => `${room.freeVcpus} vCPU(s) and ${room.freeMemoryMiB} MiB of memory free`;
  const message = node
    ? `${node.role}, ${node.nodeId}, has ${free(rooms[0]!)}: short of ${shortWords || 'room'} for ${need}`
    : short.length
      ? `no ready node of pool ${poolId} has room for ${need}: short of ${shortWords} (the most free on one node: ${mostVcpus} vCPU(s), ${mostMemory} MiB of memory)`
      : `no ready node of pool ${poolId} has ${need} free at once: the nodes with enough vCPUs lack the memory, and the other way round`;
  return new ComputeError('UNAVAILABLE', message, {
    details,
    hint: `Pick a flavor with ${short.length ? smaller : 'a smaller shape'}, delete an instance or sandbox ${node ? 'on that node' : 'of the pool'}, or retry when the pool has grown.`,
  });
}
