/** `profiles delete PROFILE [--if-version N]`: profiles.delete; refused while a machine uses it. */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';
import { profileNamed, profilePositional } from './shared.js';

export default defineCommand({
  name: 'profiles delete',
  group: 'Nodes',
  summary: 'Delete a provision profile no deploying or active machine uses (profiles.delete)',
  target: 'token',
  calls: ['profiles.delete'],
  positionals: [profilePositional],
  flags: { ifVersion: ifVersionFlag },
  examples: [
    'better-compute profiles delete gpu-worker',
    'better-compute profiles delete prof_01k… --if-version 2',
  ],
  async run({ args, flags, api }) {
    return (await api()).call(
      'profiles.delete',
      defined({ ...profileNamed(args.profile), ifVersion: flags.ifVersion }),
    );
  },
});
