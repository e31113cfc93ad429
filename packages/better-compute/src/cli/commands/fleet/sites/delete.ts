/** `sites delete SITE [--if-version N]`: sites.delete (a site with pools is refused by the server). */
import { defineCommand } from '../../../define.js';
import { defined, ifVersionFlag } from '../../shared.js';

export default defineCommand({
  name: 'sites delete',
  group: 'Fleet',
  summary: 'Delete a site that has no pools (sites.delete)',
  target: 'token',
  calls: ['sites.delete'],
  positionals: [{ name: 'site', description: 'The site id', required: true, kind: 'site' }],
  flags: { ifVersion: ifVersionFlag },
  examples: ['better-compute sites delete site_01k…'],
  async run({ args, flags, api }) {
    return (await api()).call('sites.delete', defined({ siteId: args.site, ifVersion: flags.ifVersion }));
  },
});
