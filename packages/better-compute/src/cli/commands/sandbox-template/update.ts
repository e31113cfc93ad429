/** `sandbox-template update TEMPLATE [field flags] [--if-version N]`: sandboxTemplates.update. */
import { defineCommand } from '../../define.js';
import { CliError } from '../../errors.js';
import { defined, ifVersionFlag } from '../shared.js';
import { checkTemplateFlags, templateFieldFlags, templateFields } from './flags.js';

export default defineCommand({
  name: 'sandbox-template update',
  group: 'Sandboxes',
  summary:
    'Change a sandbox template; its warm sandboxes of the old settings are retired (sandboxTemplates.update)',
  target: 'token',
  calls: ['sandboxTemplates.update', 'sandboxTemplates.get', 'flavors.list'],
  positionals: [
    { name: 'template', description: 'The template, sbxt_…', required: true, kind: 'sandboxTemplate' },
  ],
  flags: { ...templateFieldFlags, ifVersion: ifVersionFlag },
  examples: [
    'better-compute sandbox-template update sbxt_01k5w… --warm-min 4 --image img_01k5w…',
    'better-compute sandbox-template update sbxt_01k5w… --warm-min 0 --warm-max 0 --volumes agent-notes:/workspace',
  ],
  async run({ args, flags, api, io }) {
    const { ifVersion, ...fieldFlags } = flags;
    const given = Object.entries(fieldFlags).some(([key, value]) =>
      key === 'noUserData' ? value === true : value !== undefined,
    );
    if (!given)
      throw new CliError('INVALID_ARGUMENT', 'sandbox-template update needs at least one field flag', {
        details: { field: 'flags' },
        hint: 'Run "better-compute help sandbox-template update" for its flags and examples.',
      });
    checkTemplateFlags('sandbox-template update', flags);
    const client = await api();
    const fields = await templateFields('sandbox-template update', io.cwd, flags, client, async () => {
      const template = await client.call('sandboxTemplates.get', { templateId: args.template });
      return template.poolId;
    });
    return client.call('sandboxTemplates.update', {
      templateId: args.template,
      ...fields,
      ...defined({ ifVersion }),
    });
  },
});
