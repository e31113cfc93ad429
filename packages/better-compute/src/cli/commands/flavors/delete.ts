/** `flavors delete FLAVOR [--if-version N]`: flavors.delete; refused while an instance uses it. */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';

export default defineCommand({
  name: 'flavors delete',
  group: 'VPS',
  summary: 'Delete a flavor no instance uses (flavors.delete)',
  target: 'token',
  calls: ['flavors.delete'],
  positionals: [{ name: 'flavor', description: 'The flavor id', required: true, kind: 'flavor' }],
  flags: { ifVersion: ifVersionFlag },
  examples: ['better-compute flavors delete flv_01k…'],
  async run({ args, flags, api }) {
    return (await api()).call('flavors.delete', {
      flavorId: args.flavor,
      ...defined({ ifVersion: flags.ifVersion }),
    });
  },
});
