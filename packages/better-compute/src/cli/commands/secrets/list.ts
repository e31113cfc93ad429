/** `secrets list [--name NAME]`: secrets.list, names and versions only, a table by default. */
import { defineCommand } from '../../define.js';
import { defined, listResult, pageFlags, pageOf } from '../shared.js';
import { secretColumns } from './shared.js';

export default defineCommand({
  name: 'secrets list',
  group: 'Access',
  summary: 'List your tenant’s secrets: names, ids, versions and references, never values (secrets.list)',
  target: 'token',
  calls: ['secrets.list'],
  flags: {
    name: { type: 'string', description: 'Only the secret of this name', placeholder: 'NAME' },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: [
    'better-compute secrets list',
    'better-compute secrets list --name openai --query items[].reference',
  ],
  async run({ flags, api, global }) {
    const page = await (await api()).call('secrets.list', defined({ name: flags.name, ...pageOf(flags) }));
    return listResult({ global }, page, secretColumns);
  },
});
