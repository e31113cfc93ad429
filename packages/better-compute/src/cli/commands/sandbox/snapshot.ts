/** `sandbox snapshot SANDBOX [--no-memory] [--keep] [--key K]`: sandboxes.snapshot. */
import { defineCommand } from '../../define.js';
import { keyFlag, withIdempotencyKey } from '../shared.js';

export default defineCommand({
  name: 'sandbox snapshot',
  group: 'Sandboxes',
  summary: 'Snapshot a sandbox’s disk, and on qemu its memory (sandboxes.snapshot)',
  target: 'token',
  calls: ['sandboxes.snapshot'],
  positionals: [{ name: 'sandbox', description: 'The sandbox, sbx_…', required: true, kind: 'sandbox' }],
  flags: {
    noMemory: { type: 'boolean', description: 'The disk only, also on qemu (bwrap snapshots the disk only)' },
    keep: { type: 'boolean', description: 'Keep it after the sandbox is deleted' },
    key: keyFlag,
  },
  examples: ['better-compute sandbox snapshot sbx_01k5w… --keep'],
  async run(context) {
    const { args, flags, api } = context;
    const client = await api();
    return withIdempotencyKey(context, flags.key, (idempotencyKey) =>
      client.call('sandboxes.snapshot', {
        sandboxId: args.sandbox,
        keep: flags.keep,
        idempotencyKey,
        ...(flags.noMemory ? { memory: false } : {}),
      }),
    );
  },
});
