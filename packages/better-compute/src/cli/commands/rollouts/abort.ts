/** `rollouts abort ROLLOUT`: rollouts.abort. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'rollouts abort',
  group: 'Fleet',
  summary: 'Abort a rollout: nodes not yet started never receive the release (rollouts.abort)',
  target: 'token',
  calls: ['rollouts.abort'],
  positionals: [{ name: 'rollout', description: 'The rollout id', required: true, kind: 'rollout' }],
  examples: ['better-compute rollouts abort rollout_01k… --tenant root'],
  async run({ args, api }) {
    return (await api()).call('rollouts.abort', { rolloutId: args.rollout });
  },
});
