/** `secrets get SECRET`: secrets.get, the metadata (never the value). */
import { defineCommand } from '../../define.js';
import { secretNamed, secretPositional } from './shared.js';

export default defineCommand({
  name: 'secrets get',
  group: 'Access',
  summary: 'Show a secret’s id, version and reference; its value is never shown (secrets.get)',
  target: 'token',
  calls: ['secrets.get'],
  positionals: [secretPositional],
  examples: ['better-compute secrets get openai --query reference'],
  async run({ args, api }) {
    return (await api()).call('secrets.get', secretNamed(args.secret));
  },
});
