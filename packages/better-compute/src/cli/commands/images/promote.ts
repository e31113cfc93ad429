/** `images promote IMAGE --channel C [--if-version N]`: images.promote. */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';

export default defineCommand({
  name: 'images promote',
  group: 'VPS',
  summary: 'Move an image to another channel: testing → stable, or deprecated (images.promote)',
  target: 'token',
  calls: ['images.promote'],
  positionals: [{ name: 'image', description: 'The image id', required: true, kind: 'image' }],
  flags: {
    channel: {
      type: 'string',
      choices: ['testing', 'stable', 'deprecated'],
      required: true,
      description: 'The channel it moves to',
    },
    ifVersion: ifVersionFlag,
  },
  examples: ['better-compute images promote img_01k… --channel stable'],
  async run({ args, flags, api }) {
    return (await api()).call('images.promote', {
      imageId: args.image,
      channel: flags.channel,
      ...defined({ ifVersion: flags.ifVersion }),
    });
  },
});
