/** `inventory history NODE`: inventory.history, newest first, as a table by default. */
import { defineCommand } from '../../../define.js';
import { gpuSummary, listResult, pageFlags, pageOf } from '../../shared.js';

export default defineCommand({
  name: 'inventory history',
  group: 'Nodes',
  summary: 'Every inventory a node reported, newest first (inventory.history)',
  target: 'token',
  calls: ['inventory.history'],
  positionals: [{ name: 'node', description: 'The node id', required: true, kind: 'node' }],
  flags: { ...pageFlags },
  defaultFormat: 'table',
  examples: ['better-compute inventory history node_01k…'],
  async run(context) {
    const page = await (
      await context.api()
    ).call('inventory.history', {
      nodeId: context.args.node,
      ...pageOf(context.flags),
    });
    return listResult(context, page, (record) => ({
      revision: record.revision,
      recordedAt: record.recordedAt,
      cpuCores: record.inventory.cpuCores,
      memoryGiB: record.inventory.memoryGiB,
      gpus: gpuSummary(record.inventory.gpus),
    }));
  },
});
