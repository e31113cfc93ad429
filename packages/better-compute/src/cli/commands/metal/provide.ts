/** `metal provide MACHINE [--reason TEXT]`: metal.provide, one verb of the provision-state table. */
import { defineCommand } from '../../define.js';
import { defined } from '../shared.js';
import { machinePositional, reasonFlag } from './shared.js';

export default defineCommand({
  name: 'metal provide',
  group: 'Nodes',
  summary: 'Clean a manageable machine and make it available (metal.provide)',
  target: 'token',
  calls: ['metal.provide'],
  positionals: [machinePositional],
  flags: { reason: reasonFlag },
  examples: ['better-compute metal provide node_01k… --reason "rack 12 bring-up"'],
  async run({ args, flags, api }) {
    return (await api()).call('metal.provide', defined({ machineId: args.machine, reason: flags.reason }));
  },
});
