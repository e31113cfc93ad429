/** `rollouts resume ROLLOUT`: rollouts.resume. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'rollouts resume',
  group: 'Fleet',
  summary:
    'Resume a paused rollout; a wave that failed its gate is accepted and the next starts (rollouts.resume)',
  target: 'token',
  calls: ['rollouts.resume'],
  positionals: [{ name: 'rollout', description: 'The rollout id', required: true, kind: 'rollout' }],
  examples: ['better-compute rollouts resume rollout_01k… --tenant root'],
  async run({ args, api }) {
    return (await api()).call('rollouts.resume', { rolloutId: args.rollout });
  },
});
