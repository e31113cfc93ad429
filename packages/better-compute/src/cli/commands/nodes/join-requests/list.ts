/** `join-requests list [--state] [--pool]`: joinRequests.list, as a table by default. */
import { defineCommand } from '../../../define.js';
import { defined, gpuSummary, listResult, pageFlags, pageOf } from '../../shared.js';

export default defineCommand({
  name: 'join-requests list',
  group: 'Nodes',
  summary: 'List the machines that asked to join (joinRequests.list)',
  target: 'token',
  calls: ['joinRequests.list'],
  flags: {
    state: {
      type: 'string',
      choices: ['pending', 'approved', 'rejected'] as const,
      description: 'Only the requests in this state',
    },
    pool: { type: 'id', kind: 'pool', description: 'Only the requests for this pool' },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: ['better-compute join-requests list --state pending'],
  async run(context) {
    const { flags } = context;
    const page = await (
      await context.api()
    ).call('joinRequests.list', defined({ state: flags.state, poolId: flags.pool, ...pageOf(flags) }));
    return listResult(context, page, (request) => ({
      id: request.id,
      hostname: request.hostname,
      pool: request.poolId,
      state: request.state,
      gpus: gpuSummary(request.inventory.gpus),
      node: request.nodeId ?? '-',
      createdAt: request.createdAt,
    }));
  },
});
