/** `metal get MACHINE`: metal.get, the machine and what it allows now (never its BMC password). */
import { defineCommand } from '../../define.js';
import { machinePositional } from './shared.js';

export default defineCommand({
  name: 'metal get',
  group: 'Nodes',
  summary: 'Show a bare-metal machine, its states and what it allows now (metal.get)',
  target: 'token',
  calls: ['metal.get'],
  positionals: [machinePositional],
  examples: [
    'better-compute metal get node_01k…',
    'better-compute metal get node_01k… --query provisionState',
  ],
  async run({ args, api }) {
    return (await api()).call('metal.get', { machineId: args.machine });
  },
});
