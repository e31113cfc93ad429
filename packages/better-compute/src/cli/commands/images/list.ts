/** `images list [--channel C] [--name NAME]`: images.list, a table by default. */
import { defineCommand } from '../../define.js';
import { defined, listResult, pageFlags, pageOf } from '../shared.js';
import { imageColumns } from './shared.js';

export default defineCommand({
  name: 'images list',
  group: 'VPS',
  summary: 'List the images your tenant can boot: its own and the platform’s (images.list)',
  target: 'token',
  calls: ['images.list'],
  flags: {
    channel: {
      type: 'string',
      choices: ['testing', 'stable', 'deprecated'],
      description: 'Only images on this channel',
    },
    name: { type: 'string', description: 'Only the image of this name' },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: [
    'better-compute images list',
    'better-compute images list --channel stable --format json',
    'IMAGE=$(better-compute images list --name debian-12-guest --query items[0].id)',
  ],
  async run({ flags, api, global }) {
    const page = await (
      await api()
    ).call('images.list', { ...pageOf(flags), ...defined({ channel: flags.channel, name: flags.name }) });
    return listResult({ global }, page, imageColumns);
  },
});
