/** `instances start INSTANCE [--if-version N] [--wait SECONDS]`: instances.start. */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';
import { waitFlag, waitSettled } from './shared.js';

export default defineCommand({
  name: 'instances start',
  group: 'VPS',
  summary: 'Boot a stopped instance (instances.start)',
  target: 'token',
  calls: ['instances.start', 'instances.get'],
  positionals: [{ name: 'instance', description: 'The instance id', required: true, kind: 'instance' }],
  flags: {
    ifVersion: ifVersionFlag,
    wait: waitFlag,
  },
  examples: ['better-compute instances start inst_01k… --wait 120'],
  async run({ args, flags, api, log, print, status }) {
    const client = await api();
    const instance = await client.call('instances.start', {
      instanceId: args.instance,
      ...defined({ ifVersion: flags.ifVersion }),
    });
    return waitSettled({ log, print, status }, client, instance, flags.wait);
  },
});
