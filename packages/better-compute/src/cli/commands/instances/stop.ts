/** `instances stop INSTANCE [--if-version N] [--wait SECONDS]`: instances.stop. */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';
import { waitFlag, waitSettled } from './shared.js';

export default defineCommand({
  name: 'instances stop',
  group: 'VPS',
  summary: 'Power a running instance off: ACPI, then by force after --timeout (instances.stop)',
  target: 'token',
  calls: ['instances.stop', 'instances.get'],
  positionals: [{ name: 'instance', description: 'The instance id', required: true, kind: 'instance' }],
  flags: {
    timeout: {
      type: 'number',
      integer: true,
      min: 0,
      max: 3600,
      description: 'Seconds the guest has to power off before it is stopped by force (60)',
      placeholder: 'SECONDS',
    },
    ifVersion: ifVersionFlag,
    wait: waitFlag,
  },
  examples: ['better-compute instances stop inst_01k… --wait 120'],
  async run({ args, flags, api, log, print, status }) {
    const client = await api();
    const instance = await client.call('instances.stop', {
      instanceId: args.instance,
      ...defined({ ifVersion: flags.ifVersion }),
      ...defined({ timeoutSeconds: flags.timeout }),
    });
    return waitSettled({ log, print, status }, client, instance, flags.wait);
  },
});
