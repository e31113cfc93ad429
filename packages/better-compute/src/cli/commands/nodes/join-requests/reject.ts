/** `join-requests reject JREQ [--reason]`: joinRequests.reject. */
import { defineCommand } from '../../../define.js';
import { defined } from '../../shared.js';

export default defineCommand({
  name: 'join-requests reject',
  group: 'Nodes',
  summary: 'Turn down a machine that asked to join (joinRequests.reject)',
  target: 'token',
  calls: ['joinRequests.reject'],
  positionals: [
    { name: 'joinRequest', description: 'The join request id', required: true, kind: 'joinRequest' },
  ],
  flags: { reason: { type: 'string', description: 'Why, shown to the machine', placeholder: 'TEXT' } },
  examples: ['better-compute join-requests reject jreq_01k… --reason "unknown host"'],
  async run({ args, flags, api }) {
    return (await api()).call(
      'joinRequests.reject',
      defined({ joinRequestId: args.joinRequest, reason: flags.reason }),
    );
  },
});
