/** `images get IMAGE`: images.get. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'images get',
  group: 'VPS',
  summary: 'Show an image (images.get)',
  target: 'token',
  calls: ['images.get'],
  positionals: [{ name: 'image', description: 'The image id', required: true, kind: 'image' }],
  examples: ['better-compute images get img_01k…'],
  async run({ args, api }) {
    return (await api()).call('images.get', { imageId: args.image });
  },
});
