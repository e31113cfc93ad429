/** `projects create NAME [--description] [--key]`: projects.create, retry-safe. */
import { defineCommand } from '../../../define.js';
import { defined, keyFlag, withIdempotencyKey } from '../../shared.js';

export default defineCommand({
  name: 'projects create',
  group: 'Fleet',
  summary: 'Create a project; a new idempotency key each run unless --key (projects.create)',
  target: 'token',
  calls: ['projects.create'],
  positionals: [
    { name: 'name', description: 'The project’s name: lowercase letters, digits and dashes', required: true },
  ],
  flags: {
    description: { type: 'string', description: 'What it is for', placeholder: 'TEXT' },
    key: keyFlag,
  },
  examples: ['better-compute projects create training --description "LLM training runs"'],
  async run(context) {
    const { args, flags } = context;
    return withIdempotencyKey(context, flags.key, async (idempotencyKey) =>
      (await context.api()).call(
        'projects.create',
        defined({ name: args.name, description: flags.description, idempotencyKey }),
      ),
    );
  },
});
