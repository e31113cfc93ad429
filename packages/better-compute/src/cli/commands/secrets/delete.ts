/** `secrets delete SECRET [--if-version N]`: secrets.delete, the value with it. */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag } from '../shared.js';
import { secretNamed, secretPositional } from './shared.js';

export default defineCommand({
  name: 'secrets delete',
  group: 'Access',
  summary: 'Delete a secret and its value; templates naming it stop starting sandboxes (secrets.delete)',
  target: 'token',
  calls: ['secrets.delete'],
  positionals: [secretPositional],
  flags: { ifVersion: ifVersionFlag },
  examples: ['better-compute secrets delete openai', 'better-compute secrets delete sec_01k…'],
  async run({ args, flags, api }) {
    return (await api()).call(
      'secrets.delete',
      defined({ ...secretNamed(args.secret), ifVersion: flags.ifVersion }),
    );
  },
});
