/**
 * `sites update SITE [--name] [--region] [--description] [--label K=V] [--remove-label KEY]
 * [--if-version N]`: sites.update.
 */
import { CliError } from '../../../errors.js';
import { defineCommand } from '../../../define.js';
import { defined, ifVersionFlag, labelUpdate } from '../../shared.js';

export default defineCommand({
  name: 'sites update',
  group: 'Fleet',
  summary: 'Rename or relabel a site (sites.update)',
  target: 'token',
  calls: ['sites.update'],
  positionals: [{ name: 'site', description: 'The site id', required: true, kind: 'site' }],
  flags: {
    name: { type: 'string', description: 'A new name', placeholder: 'NAME' },
    region: { type: 'string', description: 'A new region', placeholder: 'REGION' },
    description: { type: 'string', description: 'A new description', placeholder: 'TEXT' },
    label: {
      type: 'string',
      repeated: true,
      description: 'A KEY=VALUE label; the labels given replace the site’s labels',
      placeholder: 'KEY=VALUE',
    },
    removeLabel: {
      type: 'string',
      repeated: true,
      description: 'A label key to remove, the other labels staying; remove every key to clear them',
      placeholder: 'KEY',
    },
    ifVersion: ifVersionFlag,
  },
  examples: [
    'better-compute sites update site_01k… --region eu-west --if-version 2',
    'better-compute sites update site_01k… --remove-label tier',
  ],
  async run({ args, flags, api, commandName }) {
    const labels = labelUpdate(commandName, flags);
    const input = defined({
      name: flags.name,
      region: flags.region,
      description: flags.description,
      labels: flags.label.length ? labels : undefined,
      removeLabels: flags.removeLabel.length ? flags.removeLabel : undefined,
    });
    if (Object.keys(input).length === 0)
      throw new CliError(
        'INVALID_ARGUMENT',
        'sites update needs something to change: --name, --region, --description or --label',
        {
          hint: `Run "better-compute help ${commandName}" for its flags and examples; --remove-label KEY removes a label.`,
        },
      );
    return (await api()).call('sites.update', {
      siteId: args.site,
      ...input,
      ...defined({ ifVersion: flags.ifVersion }),
    });
  },
});
