/** `releases get RELEASE`: releases.get by id (rel_…) or version, with its signed envelope. */
import { isId } from '@better-compute/core';
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'releases get',
  group: 'Fleet',
  summary: 'Show a registered release by id or version, with its signed envelope (releases.get)',
  target: 'token',
  calls: ['releases.get'],
  positionals: [
    { name: 'release', description: 'The release: its id (rel_…) or its version (1.4.0)', required: true },
  ],
  examples: [
    'better-compute releases get 1.4.0 --tenant root',
    'better-compute releases get rel_01k… --query manifest',
  ],
  async run({ args, api }) {
    return (await api()).call(
      'releases.get',
      isId('release', args.release) ? { releaseId: args.release } : { version: args.release },
    );
  },
});
