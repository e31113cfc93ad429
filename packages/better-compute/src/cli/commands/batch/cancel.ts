/**
 * `batch cancel --batch ID`: commandBatches.cancel ends a pending batch, and its held commands are
 * cancelled and never run. No --yes: unlike `nodes delete`, it destroys nothing; it stops the
 * destructive work (docs/decisions/batch-cli.md).
 */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'batch cancel',
  group: 'Batches',
  summary: 'End a pending batch: its held commands are cancelled and never run (commandBatches.cancel)',
  target: 'token',
  calls: ['commandBatches.cancel'],
  flags: {
    batch: {
      type: 'id',
      kind: 'batch',
      required: true,
      description: 'The pending batch to end',
      placeholder: 'ID',
    },
  },
  examples: ['better-compute batch cancel --tenant acme --batch batch_01k5w…'],
  async run({ flags, api }) {
    return (await api()).call('commandBatches.cancel', { batchId: flags.batch });
  },
});
