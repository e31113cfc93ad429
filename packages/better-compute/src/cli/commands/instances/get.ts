/** `instances get INSTANCE`: instances.get. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'instances get',
  group: 'VPS',
  summary: 'Show an instance: its state, node, shape and address (instances.get)',
  target: 'token',
  calls: ['instances.get'],
  positionals: [{ name: 'instance', description: 'The instance id', required: true, kind: 'instance' }],
  examples: ['better-compute instances get inst_01k…'],
  async run({ args, api }) {
    return (await api()).call('instances.get', { instanceId: args.instance });
  },
});
