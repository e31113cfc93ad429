/** `metal retire MACHINE [--reason TEXT]`: metal.retire, one verb of the provision-state table. */
import { defineCommand } from '../../define.js';
import { defined } from '../shared.js';
import { machinePositional, reasonFlag } from './shared.js';

export default defineCommand({
  name: 'metal retire',
  group: 'Nodes',
  summary: 'Retire a machine that holds nothing (metal.retire)',
  target: 'token',
  calls: ['metal.retire'],
  positionals: [machinePositional],
  flags: { reason: reasonFlag },
  examples: ['better-compute metal retire node_01k… --reason "rack 12 bring-up"'],
  async run({ args, flags, api }) {
    return (await api()).call('metal.retire', defined({ machineId: args.machine, reason: flags.reason }));
  },
});
