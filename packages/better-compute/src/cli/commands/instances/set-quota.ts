/** `instances set-quota --pool POOL --subject TENANT --resource R --limit N|none`: instances.setQuota. */
import { isTenantId } from '@better-compute/core';
import { defineCommand } from '../../define.js';
import { CliError } from '../../errors.js';

export default defineCommand({
  name: 'instances set-quota',
  group: 'VPS',
  summary:
    'Limit (or with --limit none, stop limiting) what a tenant holds in instances on a pool you own (instances.setQuota)',
  target: 'token',
  calls: ['instances.setQuota'],
  flags: {
    pool: { type: 'id', kind: 'pool', required: true, description: 'The VPS pool' },
    subject: {
      type: 'string',
      required: true,
      description: 'The tenant the quota limits',
      placeholder: 'TENANT',
    },
    resource: {
      type: 'string',
      choices: ['instances', 'vcpus', 'memoryMiB'],
      required: true,
      description: 'Instances, vCPUs or memory (MiB) held at once',
    },
    limit: {
      type: 'string',
      required: true,
      description: 'The limit, or none to clear it',
      placeholder: 'N|none',
    },
  },
  examples: [
    'better-compute instances set-quota --pool pool_01k… --subject acme --resource vcpus --limit 64',
    'better-compute instances set-quota --pool pool_01k… --subject acme --resource instances --limit none',
  ],
  async run({ flags, api }) {
    if (!isTenantId(flags.subject))
      throw new CliError(
        'INVALID_ARGUMENT',
        `--subject must be a tenant id such as acme (got "${flags.subject}")`,
        {
          details: { field: 'subject' },
        },
      );
    let limit: number | null = null;
    if (flags.limit !== 'none') {
      if (!/^\d{1,10}$/.test(flags.limit) || Number(flags.limit) > 2_147_483_647)
        throw new CliError(
          'INVALID_ARGUMENT',
          `--limit must be a whole number or none (got "${flags.limit}")`,
          {
            details: { field: 'limit' },
          },
        );
      limit = Number(flags.limit);
    }
    return (await api()).call('instances.setQuota', {
      poolId: flags.pool,
      subjectTenantId: flags.subject,
      resource: flags.resource,
      limit,
    });
  },
});
