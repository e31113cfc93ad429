/** `instances delete INSTANCE [--if-version N] [--wait SECONDS]`: instances.delete. */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';
import { waitFlag, waitSettled } from './shared.js';

export default defineCommand({
  name: 'instances delete',
  group: 'VPS',
  summary: 'Delete an instance: stop it, remove its disk, free its place (instances.delete)',
  target: 'token',
  calls: ['instances.delete', 'instances.get'],
  positionals: [{ name: 'instance', description: 'The instance id', required: true, kind: 'instance' }],
  flags: {
    ifVersion: ifVersionFlag,
    wait: waitFlag,
  },
  examples: ['better-compute instances delete inst_01k… --wait 120'],
  async run({ args, flags, api, log, print, status }) {
    const client = await api();
    const instance = await client.call('instances.delete', {
      instanceId: args.instance,
      ...defined({ ifVersion: flags.ifVersion }),
    });
    return waitSettled({ log, print, status }, client, instance, flags.wait);
  },
});
