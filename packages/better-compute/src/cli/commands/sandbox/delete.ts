/** `sandbox delete SANDBOX`: sandboxes.delete; its snapshots go with it unless kept. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'sandbox delete',
  group: 'Sandboxes',
  summary: 'Delete a sandbox and its snapshots that are not kept (sandboxes.delete)',
  target: 'token',
  calls: ['sandboxes.delete'],
  positionals: [{ name: 'sandbox', description: 'The sandbox, sbx_…', required: true, kind: 'sandbox' }],
  examples: ['better-compute sandbox delete sbx_01k5w…'],
  async run({ args, api }) {
    return (await api()).call('sandboxes.delete', { sandboxId: args.sandbox });
  },
});
