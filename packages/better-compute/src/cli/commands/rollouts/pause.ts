/** `rollouts pause ROLLOUT`: rollouts.pause. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'rollouts pause',
  group: 'Fleet',
  summary: 'Pause a running rollout: nodes updating finish, no further wave starts (rollouts.pause)',
  target: 'token',
  calls: ['rollouts.pause'],
  positionals: [{ name: 'rollout', description: 'The rollout id', required: true, kind: 'rollout' }],
  examples: ['better-compute rollouts pause rollout_01k… --tenant root'],
  async run({ args, api }) {
    return (await api()).call('rollouts.pause', { rolloutId: args.rollout });
  },
});
