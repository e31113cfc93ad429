/** `join-requests approve JREQ [--label KEY=VALUE]`: joinRequests.approve; the machine becomes a node. */
import { defineCommand } from '../../../define.js';
import { defined, keyValues } from '../../shared.js';

export default defineCommand({
  name: 'join-requests approve',
  group: 'Nodes',
  summary: 'Admit a machine: it becomes a node in the token’s pool (joinRequests.approve)',
  target: 'token',
  calls: ['joinRequests.approve'],
  positionals: [
    { name: 'joinRequest', description: 'The join request id', required: true, kind: 'joinRequest' },
  ],
  flags: {
    label: {
      type: 'string',
      repeated: true,
      description: 'A KEY=VALUE label for the new node',
      placeholder: 'KEY=VALUE',
    },
  },
  examples: [
    'better-compute join-requests approve jreq_01k…',
    'better-compute join-requests approve jreq_01k… --label rack=r12',
  ],
  async run({ args, flags, api, commandName }) {
    const labels = keyValues(commandName, 'label', flags.label);
    return (await api()).call(
      'joinRequests.approve',
      defined({ joinRequestId: args.joinRequest, labels: flags.label.length ? labels : undefined }),
    );
  },
});
