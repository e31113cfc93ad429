/** `sites create --name NAME (or NAME) [--region] [--description] [--label K=V] [--key]`: sites.create, retry-safe. */
import { defineCommand, nameFlag } from '../../../define.js';
import { defined, keyFlag, keyValues, withIdempotencyKey } from '../../shared.js';

export default defineCommand({
  name: 'sites create',
  group: 'Fleet',
  summary: 'Create a site; a new idempotency key each run unless --key (sites.create)',
  target: 'token',
  calls: ['sites.create'],
  flags: {
    name: nameFlag('The site’s name: lowercase letters, digits and dashes'),
    region: { type: 'string', description: 'Its region', placeholder: 'REGION' },
    description: { type: 'string', description: 'What it is', placeholder: 'TEXT' },
    label: {
      type: 'string',
      repeated: true,
      description: 'A KEY=VALUE label',
      placeholder: 'KEY=VALUE',
    },
    key: keyFlag,
  },
  examples: ['better-compute sites create --name fra-1 --region eu-central --label tier=gold'],
  async run(context) {
    const { flags, commandName } = context;
    const labels = keyValues(commandName, 'label', flags.label);
    return withIdempotencyKey(context, flags.key, async (idempotencyKey) =>
      (await context.api()).call(
        'sites.create',
        defined({
          name: flags.name,
          region: flags.region,
          description: flags.description,
          labels: flags.label.length ? labels : undefined,
          idempotencyKey,
        }),
      ),
    );
  },
});
