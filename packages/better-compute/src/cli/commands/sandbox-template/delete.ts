/** `sandbox-template delete TEMPLATE [--if-version N]`: sandboxTemplates.delete. */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';

export default defineCommand({
  name: 'sandbox-template delete',
  group: 'Sandboxes',
  summary:
    'Delete a sandbox template with no live sandboxes; its warm pool is retired (sandboxTemplates.delete)',
  target: 'token',
  calls: ['sandboxTemplates.delete'],
  positionals: [
    { name: 'template', description: 'The template, sbxt_…', required: true, kind: 'sandboxTemplate' },
  ],
  flags: { ifVersion: ifVersionFlag },
  examples: ['better-compute sandbox-template delete sbxt_01k5w…'],
  async run({ args, flags, api }) {
    return (await api()).call('sandboxTemplates.delete', {
      templateId: args.template,
      ...defined({ ifVersion: flags.ifVersion }),
    });
  },
});
