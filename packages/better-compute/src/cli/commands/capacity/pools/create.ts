/** `pools create --site SITE --name NAME`: retry-safe with --key; a new key on every run otherwise. */
import { defineCommand, nameFlag } from '../../../define.js';
import { keyValues, withIdempotencyKey } from '../../shared.js';

export default defineCommand({
  name: 'pools create',
  group: 'Capacity',
  summary: 'Create a pool at a site (pools.create)',
  target: 'token',
  calls: ['pools.create'],
  flags: {
    site: { type: 'id', kind: 'site', required: true, description: 'The site the pool is at' },
    name: nameFlag('The pool’s name'),
    class: {
      type: 'string',
      choices: ['gpu', 'vps', 'metal'],
      default: 'gpu',
      description: 'The pool’s class',
    },
    driver: {
      type: 'string',
      description: 'The machine driver (default bcd; see drivers list)',
      placeholder: 'DRIVER',
    },
    description: { type: 'string', description: 'A description', placeholder: 'TEXT' },
    label: {
      type: 'string',
      repeated: true,
      description: 'A label, key=value',
      placeholder: 'K=V',
    },
    key: {
      type: 'string',
      description: 'The idempotency key, to retry without creating twice',
      placeholder: 'KEY',
    },
  },
  examples: [
    'better-compute pools create --site site_01k… --name gpu-main',
    'better-compute pools create --site site_01k… --name vps-eu --class vps --label zone=eu-1',
  ],
  async run({ flags, api, log, commandName }) {
    const labels = keyValues(commandName, 'label', flags.label);
    return withIdempotencyKey({ log, commandName }, flags.key, async (idempotencyKey) =>
      (await api()).call('pools.create', {
        siteId: flags.site,
        name: flags.name,
        class: flags.class as 'gpu' | 'vps' | 'metal',
        ...(flags.driver ? { driver: flags.driver } : {}),
        ...(flags.description !== undefined ? { description: flags.description } : {}),
        ...(flags.label.length ? { labels } : {}),
        idempotencyKey,
      }),
    );
  },
});
