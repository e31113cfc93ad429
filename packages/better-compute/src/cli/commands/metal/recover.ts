/** `metal recover MACHINE [--reason TEXT]`: metal.recover, one verb of the provision-state table. */
import { defineCommand } from '../../define.js';
import { defined } from '../shared.js';
import { machinePositional, reasonFlag } from './shared.js';

export default defineCommand({
  name: 'metal recover',
  group: 'Nodes',
  summary: 'Return a machine from a failure state, once you have looked (metal.recover)',
  target: 'token',
  calls: ['metal.recover'],
  positionals: [machinePositional],
  flags: { reason: reasonFlag },
  examples: ['better-compute metal recover node_01k… --reason "rack 12 bring-up"'],
  async run({ args, flags, api }) {
    return (await api()).call('metal.recover', defined({ machineId: args.machine, reason: flags.reason }));
  },
});
