/** `sandbox get SANDBOX`: sandboxes.get, with its snapshots. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'sandbox get',
  group: 'Sandboxes',
  summary: 'Show a sandbox with its snapshots (sandboxes.get)',
  target: 'token',
  calls: ['sandboxes.get'],
  positionals: [{ name: 'sandbox', description: 'The sandbox, sbx_…', required: true, kind: 'sandbox' }],
  examples: ['better-compute sandbox get sbx_01k5w…'],
  async run({ args, api }) {
    return (await api()).call('sandboxes.get', { sandboxId: args.sandbox });
  },
});
