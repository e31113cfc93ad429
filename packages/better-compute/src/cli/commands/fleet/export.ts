/**
 * `fleet export [--out FILE]`: fleet.export, the tenant's platform objects as a FleetConfig
 * document, keyed by id. `--out` writes a new file (never over one: ALREADY_EXISTS).
 */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'fleet export',
  group: 'Fleet',
  summary:
    'Write the fleet (sites, pools with quotas and offers, flavors, sandbox templates) as a FleetConfig document (fleet.export)',
  target: 'token',
  calls: ['fleet.export'],
  flags: {
    out: {
      type: 'string',
      description: 'Write the document to this new file (never over an existing one)',
      placeholder: 'FILE',
    },
  },
  examples: ['better-compute fleet export --out fleet.json', 'better-compute fleet export --query pools'],
  async run({ flags, io, api }) {
    // Claimed before the call, so a taken name costs nothing and a failed export leaves no file.
    const { createOutFile } = await import('../shared.js');
    const file =
      flags.out === undefined
        ? undefined
        : await createOutFile(io.cwd, flags.out, 'an export is never written over a file');
    try {
      const document = await (await api()).call('fleet.export', {});
      if (!file) return document;
      await file.write(`${JSON.stringify(document, null, 2)}\n`);
      return {
        out: file.path,
        sites: Object.keys(document.sites).length,
        pools: Object.keys(document.pools).length,
        flavors: Object.keys(document.flavors).length,
        sandboxTemplates: Object.keys(document.sandboxTemplates).length,
      };
    } catch (error) {
      await file?.discard();
      throw error;
    }
  },
});
