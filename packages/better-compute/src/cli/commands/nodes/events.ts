/** `nodes events NODE`: nodes.events, oldest first, as a table by default. */
import { defineCommand } from '../../define.js';
import { listResult, pageFlags, pageOf } from '../shared.js';

export default defineCommand({
  name: 'nodes events',
  group: 'Nodes',
  summary: 'A node’s events, oldest first (nodes.events)',
  target: 'token',
  calls: ['nodes.events'],
  positionals: [{ name: 'node', description: 'The node id', required: true, kind: 'node' }],
  flags: { ...pageFlags },
  defaultFormat: 'table',
  examples: ['better-compute nodes events node_01k…', 'better-compute nodes events node_01k… --format json'],
  async run(context) {
    const page = await (
      await context.api()
    ).call('nodes.events', {
      nodeId: context.args.node,
      ...pageOf(context.flags),
    });
    return listResult(context, page, (event) => ({
      position: event.position,
      type: event.type,
      occurredAt: event.occurredAt,
      actor: event.actor ?? '-',
      data: event.data,
    }));
  },
});
