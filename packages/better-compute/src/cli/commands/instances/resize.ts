/** `instances resize INSTANCE --flavor FLAVOR [--if-version N] [--wait SECONDS]`: instances.resize (stopped only). */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';
import { waitFlag, waitSettled } from './shared.js';

export default defineCommand({
  name: 'instances resize',
  group: 'VPS',
  summary: 'Give a stopped instance another flavor of its pool; its disk only grows (instances.resize)',
  target: 'token',
  calls: ['instances.resize', 'instances.get'],
  positionals: [{ name: 'instance', description: 'The instance id', required: true, kind: 'instance' }],
  flags: {
    flavor: { type: 'id', kind: 'flavor', required: true, description: 'The new flavor, of the same pool' },
    ifVersion: ifVersionFlag,
    wait: waitFlag,
  },
  examples: ['better-compute instances resize inst_01k… --flavor flv_01k… --wait 60'],
  async run({ args, flags, api, log, print, status }) {
    const client = await api();
    const instance = await client.call('instances.resize', {
      instanceId: args.instance,
      flavorId: flags.flavor,
      ...defined({ ifVersion: flags.ifVersion }),
    });
    return waitSettled({ log, print, status }, client, instance, flags.wait);
  },
});
