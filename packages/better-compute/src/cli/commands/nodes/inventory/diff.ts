/** `inventory diff NODE [--from REV] [--to REV]`: inventory.diff (default: the last two revisions). */
import { defineCommand } from '../../../define.js';
import { defined } from '../../shared.js';

export default defineCommand({
  name: 'inventory diff',
  group: 'Nodes',
  summary: 'What changed between two inventory revisions, by default the last two (inventory.diff)',
  target: 'token',
  calls: ['inventory.diff'],
  positionals: [{ name: 'node', description: 'The node id', required: true, kind: 'node' }],
  flags: {
    from: { type: 'number', integer: true, min: 1, description: 'The older revision', placeholder: 'REV' },
    to: { type: 'number', integer: true, min: 1, description: 'The newer revision', placeholder: 'REV' },
  },
  // Not a list, so JSON by default like every other result; --format table shows one row per change.
  tableRows: (result) => (result as { changes: unknown[] }).changes,
  examples: [
    'better-compute inventory diff node_01k…',
    'better-compute inventory diff node_01k… --from 1 --to 3 --format table',
  ],
  async run({ args, flags, api }) {
    return (await api()).call(
      'inventory.diff',
      defined({ nodeId: args.node, fromRevision: flags.from, toRevision: flags.to }),
    );
  },
});
