/**
 * `sites delete SITE [--if-version N]`: sites.delete. The server refuses a site that has had a pool:
 * pools are archived, never deleted, and keep their site.
 */
import { defineCommand } from '../../../define.js';
import { defined, ifVersionFlag } from '../../shared.js';

export default defineCommand({
  name: 'sites delete',
  group: 'Fleet',
  summary: 'Delete a site that never had a pool (sites.delete)',
  target: 'token',
  calls: ['sites.delete'],
  positionals: [{ name: 'site', description: 'The site id', required: true, kind: 'site' }],
  flags: { ifVersion: ifVersionFlag },
  examples: ['better-compute sites delete site_01k…'],
  async run({ args, flags, api }) {
    return (await api()).call('sites.delete', defined({ siteId: args.site, ifVersion: flags.ifVersion }));
  },
});
