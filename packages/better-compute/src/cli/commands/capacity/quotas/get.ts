/** `quotas get --pool POOL [--subject TENANT]`. */
import { isTenantId } from '@better-compute/core';
import { defineCommand } from '../../../define.js';
import { CliError } from '../../../errors.js';

export default defineCommand({
  name: 'quotas get',
  group: 'Capacity',
  summary: 'Show a tenant’s quotas on a pool: limit and what it holds (quotas.get)',
  target: 'token',
  calls: ['quotas.get'],
  flags: {
    pool: { type: 'id', kind: 'pool', required: true, description: 'The pool' },
    subject: {
      type: 'string',
      description: 'The tenant the quota limits (default: the acting tenant)',
      placeholder: 'TENANT',
    },
  },
  defaultFormat: 'table',
  tableRows: (result) =>
    (
      result as {
        items: {
          tenantId: string;
          poolId: string;
          resource: string;
          limit: number | null;
          used: number;
          version: number;
        }[];
      }
    ).items.map((q) => ({
      tenant: q.tenantId,
      pool: q.poolId,
      resource: q.resource,
      limit: q.limit ?? 'none',
      used: q.used,
      version: q.version,
    })),
  examples: [
    'better-compute quotas get --pool pool_01k…',
    'better-compute quotas get --pool pool_01k… --subject acme',
  ],
  async run({ flags, api }) {
    if (flags.subject !== undefined && !isTenantId(flags.subject)) {
      throw new CliError(
        'INVALID_ARGUMENT',
        `--subject must be a tenant id such as acme (got "${flags.subject}")`,
        {
          details: { field: 'subject' },
        },
      );
    }
    return (await api()).call('quotas.get', {
      poolId: flags.pool,
      ...(flags.subject !== undefined ? { subjectTenantId: flags.subject } : {}),
    });
  },
});
