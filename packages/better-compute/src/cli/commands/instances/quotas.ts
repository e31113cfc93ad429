/** `instances quotas --pool POOL [--subject TENANT]`: instances.quotas. */
import { isTenantId } from '@better-compute/core';
import { defineCommand } from '../../define.js';
import { CliError } from '../../errors.js';
import { defined } from '../shared.js';

export default defineCommand({
  name: 'instances quotas',
  group: 'VPS',
  summary: 'Show a tenant’s instance quotas on a pool and what it holds (instances.quotas)',
  target: 'token',
  calls: ['instances.quotas'],
  flags: {
    pool: { type: 'id', kind: 'pool', required: true, description: 'The VPS pool' },
    subject: {
      type: 'string',
      description: 'The tenant the quotas limit (default: the acting tenant; others for the pool’s owner)',
      placeholder: 'TENANT',
    },
  },
  defaultFormat: 'table',
  examples: [
    'better-compute instances quotas --pool pool_01k…',
    'better-compute instances quotas --pool pool_01k… --subject acme',
  ],
  async run({ flags, api }) {
    if (flags.subject !== undefined && !isTenantId(flags.subject))
      throw new CliError(
        'INVALID_ARGUMENT',
        `--subject must be a tenant id such as acme (got "${flags.subject}")`,
        {
          details: { field: 'subject' },
        },
      );
    return (await api()).call('instances.quotas', {
      poolId: flags.pool,
      ...defined({ subjectTenantId: flags.subject }),
    });
  },
});
