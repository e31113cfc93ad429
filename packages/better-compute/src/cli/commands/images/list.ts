/** `images list [--channel C]`: images.list, a table by default. */
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
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: ['better-compute images list', 'better-compute images list --channel stable --format json'],
  async run({ flags, api, global }) {
    const page = await (
      await api()
    ).call('images.list', { ...pageOf(flags), ...defined({ channel: flags.channel }) });
    return listResult({ global }, page, imageColumns);
  },
});
