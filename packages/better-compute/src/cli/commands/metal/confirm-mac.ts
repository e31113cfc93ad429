/** `metal confirm-mac --machine MACHINE --mac MAC`: metal.confirmMac, a person binds a machine's PXE MAC. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'metal confirm-mac',
  group: 'Nodes',
  summary:
    'Bind a MAC as the PXE MAC of a machine enrolled without MACs; it then boots from it (metal.confirmMac)',
  target: 'token',
  calls: ['metal.confirmMac'],
  flags: {
    machine: {
      type: 'id',
      kind: 'node',
      required: true,
      description: 'The machine enrolled without MACs (node_…)',
    },
    mac: {
      type: 'string',
      required: true,
      description: 'The PXE MAC, upper or lower case, : or - between pairs',
      placeholder: 'MAC',
    },
  },
  examples: [
    'better-compute metal discovered --site site_01k…   # a candidate row names the machine and MAC',
    'better-compute metal confirm-mac --machine node_01k… --mac 52:54:00:12:34:56',
  ],
  async run({ flags, api }) {
    return (await api()).call('metal.confirmMac', { machineId: flags.machine, mac: flags.mac });
  },
});
