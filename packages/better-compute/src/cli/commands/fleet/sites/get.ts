/** `sites get SITE`: sites.get. */
import { defineCommand } from '../../../define.js';

export default defineCommand({
  name: 'sites get',
  group: 'Fleet',
  summary: 'Show a site (sites.get)',
  target: 'token',
  calls: ['sites.get'],
  positionals: [{ name: 'site', description: 'The site id', required: true, kind: 'site' }],
  examples: ['better-compute sites get site_01k…'],
  async run({ args, api }) {
    return (await api()).call('sites.get', { siteId: args.site });
  },
});
