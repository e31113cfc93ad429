/** `profiles get PROFILE`: profiles.get, the profile and its document. */
import { defineCommand } from '../../define.js';
import { profileNamed, profilePositional } from './shared.js';

export default defineCommand({
  name: 'profiles get',
  group: 'Nodes',
  summary: 'Show a provision profile, its version and its document (profiles.get)',
  target: 'token',
  calls: ['profiles.get'],
  positionals: [profilePositional],
  examples: [
    'better-compute profiles get gpu-worker',
    'better-compute profiles get gpu-worker --query document > gpu-worker.json',
  ],
  async run({ args, api }) {
    return (await api()).call('profiles.get', profileNamed(args.profile));
  },
});
