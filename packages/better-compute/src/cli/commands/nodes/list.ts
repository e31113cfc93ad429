/** `nodes list [--pool] [--state]`: nodes.list, as a table by default (CPUs, memory, GPUs, state). */
import { defineCommand } from '../../define.js';
import { defined, gpuSummary, listResult, pageFlags, pageOf } from '../shared.js';

const NODE_STATES = ['joining', 'ready', 'cordoned', 'draining', 'drained', 'offline', 'retired'] as const;

export default defineCommand({
  name: 'nodes list',
  group: 'Nodes',
  summary: 'List the nodes of the tenant’s pools (nodes.list)',
  target: 'token',
  calls: ['nodes.list'],
  flags: {
    pool: { type: 'id', kind: 'pool', description: 'Only the nodes of this pool' },
    state: { type: 'string', choices: NODE_STATES, description: 'Only the nodes in this state' },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: ['better-compute nodes list', 'better-compute nodes list --pool pool_01k… --state ready'],
  async run(context) {
    const { flags } = context;
    const page = await (
      await context.api()
    ).call('nodes.list', defined({ poolId: flags.pool, state: flags.state, ...pageOf(flags) }));
    return listResult(context, page, (node) => ({
      id: node.id,
      name: node.name,
      pool: node.poolId,
      state: node.state,
      // What the daemon last reported of the machine (README: its real CPUs and memory).
      cpus: node.cpuCores,
      memory: `${node.memoryGiB} GiB`,
      gpus: gpuSummary(node.gpus),
      // Bound to nothing, whatever the state: `capacity` counts a cordoned node's idle GPUs as unavailable.
      idle: `${node.freeGpus}/${node.gpuCount}`,
      version: node.version,
      heartbeat: node.lastHeartbeatAt ?? '-',
    }));
  },
});
