/** `projects create --name NAME (or NAME) [--description] [--key]`: projects.create, retry-safe. */
import { defineCommand, nameFlag } from '../../../define.js';
import { defined, keyFlag, withIdempotencyKey } from '../../shared.js';

export default defineCommand({
  name: 'projects create',
  group: 'Fleet',
  summary: 'Create a project; a new idempotency key each run unless --key (projects.create)',
  target: 'token',
  calls: ['projects.create'],
  flags: {
    name: nameFlag('The project’s name: lowercase letters, digits and dashes'),
    description: { type: 'string', description: 'What it is for', placeholder: 'TEXT' },
    key: keyFlag,
  },
  examples: ['better-compute projects create --name training --description "LLM training runs"'],
  async run(context) {
    const { flags } = context;
    return withIdempotencyKey(context, flags.key, async (idempotencyKey) =>
      (await context.api()).call(
        'projects.create',
        defined({ name: flags.name, description: flags.description, idempotencyKey }),
      ),
    );
  },
});
