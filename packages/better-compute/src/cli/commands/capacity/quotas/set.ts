/** `quotas set --pool POOL --subject TENANT --limit N|none [--resource gpus|reservations]`. */
import { isTenantId } from '@better-compute/core';
import { defineCommand } from '../../../define.js';
import { CliError } from '../../../errors.js';

export default defineCommand({
  name: 'quotas set',
  group: 'Capacity',
  summary: 'Set or clear (--limit none) a tenant’s quota on a pool you own (quotas.set)',
  target: 'token',
  calls: ['quotas.set'],
  flags: {
    pool: { type: 'id', kind: 'pool', required: true, description: 'The pool' },
    subject: {
      type: 'string',
      required: true,
      description: 'The tenant the quota limits',
      placeholder: 'TENANT',
    },
    resource: {
      type: 'string',
      choices: ['gpus', 'reservations'],
      default: 'gpus',
      description: 'GPUs or reservations held at once',
    },
    limit: {
      type: 'string',
      required: true,
      description: 'The limit, or none to clear it',
      placeholder: 'N|none',
    },
    ifVersion: {
      type: 'number',
      integer: true,
      min: 1,
      description: 'Apply only at this version (else CONFLICT)',
    },
  },
  examples: [
    'better-compute quotas set --pool pool_01k… --subject acme --limit 16',
    'better-compute quotas set --pool pool_01k… --subject acme --resource reservations --limit none',
  ],
  async run({ flags, api }) {
    if (!isTenantId(flags.subject)) {
      throw new CliError(
        'INVALID_ARGUMENT',
        `--subject must be a tenant id such as acme (got "${flags.subject}")`,
        {
          details: { field: 'subject' },
        },
      );
    }
    let limit: number | null;
    if (flags.limit === 'none') limit = null;
    else if (/^\d+$/.test(flags.limit) && Number(flags.limit) <= 1_000_000) limit = Number(flags.limit);
    else {
      throw new CliError(
        'INVALID_ARGUMENT',
        `--limit must be a whole number from 0 to 1000000, or none (got "${flags.limit}")`,
        { details: { field: 'limit' } },
      );
    }
    return (await api()).call('quotas.set', {
      poolId: flags.pool,
      subjectTenantId: flags.subject,
      resource: flags.resource as 'gpus' | 'reservations',
      limit,
      ...(flags.ifVersion !== undefined ? { ifVersion: flags.ifVersion } : {}),
    });
  },
});
