/** `sandbox-template create --name --pool --flavor --image [field flags] [--runtime] [--key]`: sandboxTemplates.create. */
import { defineCommand, nameFlag } from '../../define.js';
import { keyFlag, withIdempotencyKey } from '../shared.js';
import { checkTemplateFlags, templateFieldFlags, templateFields } from './flags.js';

export default defineCommand({
  name: 'sandbox-template create',
  group: 'Sandboxes',
  summary: 'Define a sandbox template on a VPS pool (sandboxTemplates.create)',
  target: 'token',
  calls: ['sandboxTemplates.create', 'flavors.list'],
  flags: {
    name: nameFlag('Its name in the tenant'),
    pool: { type: 'id', kind: 'pool', required: true, description: 'The VPS pool its sandboxes run on' },
    runtime: {
      type: 'string',
      choices: ['bwrap', 'qemu'],
      description: 'bwrap (default; disk snapshots) or qemu (memory snapshots too)',
    },
    ...templateFieldFlags,
    flavor: { ...templateFieldFlags.flavor, required: true },
    image: { ...templateFieldFlags.image, required: true },
    key: keyFlag,
  },
  examples: [
    'better-compute sandbox-template create --name python --pool pool_01k5w… --flavor small --image img_01k5w… --warm-min 2 --max-ttl 4h --network private',
  ],
  async run(context) {
    const { flags, api, io } = context;
    if (flags.noUserData)
      throw new (await import('../../errors.js')).CliError(
        'INVALID_ARGUMENT',
        '--no-user-data is for update; a new template has none unless --user-data',
        {
          details: { field: 'noUserData' },
        },
      );
    checkTemplateFlags('sandbox-template create', flags);
    const client = await api();
    const fields = await templateFields(
      'sandbox-template create',
      io.cwd,
      flags,
      client,
      async () => flags.pool,
    );
    return withIdempotencyKey(context, flags.key, (idempotencyKey) =>
      client.call('sandboxTemplates.create', {
        name: flags.name,
        poolId: flags.pool,
        ...(flags.runtime ? { runtime: flags.runtime } : {}),
        ...(fields as { flavorId: string; imageId: string }),
        idempotencyKey,
      }),
    );
  },
});
