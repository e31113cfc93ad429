/** `rollouts get ROLLOUT`: rollouts.get. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'rollouts get',
  group: 'Fleet',
  summary: 'Show a rollout: its waves, nodes, states and timings (rollouts.get)',
  target: 'token',
  calls: ['rollouts.get'],
  positionals: [{ name: 'rollout', description: 'The rollout id', required: true, kind: 'rollout' }],
  examples: ['better-compute rollouts get rollout_01k… --tenant root'],
  async run({ args, api }) {
    return (await api()).call('rollouts.get', { rolloutId: args.rollout });
  },
});
