/** `metal abort MACHINE [--reason TEXT]`: metal.abort, one verb of the provision-state table. */
import { defineCommand } from '../../define.js';
import { defined } from '../shared.js';
import { machinePositional, reasonFlag } from './shared.js';

export default defineCommand({
  name: 'metal abort',
  group: 'Nodes',
  summary: 'Interrupt a running transition where the state table allows it (metal.abort)',
  target: 'token',
  calls: ['metal.abort'],
  positionals: [machinePositional],
  flags: { reason: reasonFlag },
  examples: ['better-compute metal abort node_01k… --reason "rack 12 bring-up"'],
  async run({ args, flags, api }) {
    return (await api()).call('metal.abort', defined({ machineId: args.machine, reason: flags.reason }));
  },
});
