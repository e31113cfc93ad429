/** `metal inspect MACHINE [--reason TEXT]`: metal.inspect, one verb of the provision-state table. */
import { defineCommand } from '../../define.js';
import { defined } from '../shared.js';
import { machinePositional, reasonFlag } from './shared.js';

export default defineCommand({
  name: 'metal inspect',
  group: 'Nodes',
  summary:
    'Boot the deploy ramdisk on a manageable machine; its real hardware lands in the machine’s inventory (metal.inspect)',
  target: 'token',
  calls: ['metal.inspect'],
  positionals: [machinePositional],
  flags: { reason: reasonFlag },
  examples: [
    'better-compute metal inspect node_01k… --reason "new rack"',
    'better-compute metal get node_01k… --query inventory',
  ],
  async run({ args, flags, api }) {
    return (await api()).call('metal.inspect', defined({ machineId: args.machine, reason: flags.reason }));
  },
});
