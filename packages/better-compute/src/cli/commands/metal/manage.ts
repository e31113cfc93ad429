/** `metal manage MACHINE [--reason TEXT]`: metal.manage, one verb of the provision-state table. */
import { defineCommand } from '../../define.js';
import { defined } from '../shared.js';
import { machinePositional, reasonFlag } from './shared.js';

export default defineCommand({
  name: 'metal manage',
  group: 'Nodes',
  summary: 'Verify the BMC through the site agent; the machine becomes manageable (metal.manage)',
  target: 'token',
  calls: ['metal.manage'],
  positionals: [machinePositional],
  flags: { reason: reasonFlag },
  examples: ['better-compute metal manage node_01k… --reason "rack 12 bring-up"'],
  async run({ args, flags, api }) {
    return (await api()).call('metal.manage', defined({ machineId: args.machine, reason: flags.reason }));
  },
});
