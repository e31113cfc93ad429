/** `pools offer|unoffer POOL --to TENANT`: one shape, calling the method of its name. */
import { isTenantId } from '@better-compute/core';
import { defineCommand } from '../../../define.js';
import { CliError } from '../../../errors.js';

export function offerCommand(verb: 'offer' | 'unoffer', summary: string) {
  const method = `pools.${verb}` as const;
  return defineCommand({
    name: `pools ${verb}`,
    group: 'Capacity',
    summary: `${summary} (${method})`,
    target: 'token',
    calls: [method],
    positionals: [{ name: 'pool', description: 'The pool, pool_…', required: true, kind: 'pool' }],
    flags: {
      to: { type: 'string', required: true, description: 'The tenant', placeholder: 'TENANT' },
      ifVersion: {
        type: 'number',
        integer: true,
        min: 1,
        description: 'Apply only at this version (else CONFLICT)',
      },
    },
    examples: [`better-compute pools ${verb} pool_01k… --to acme`],
    async run({ args, flags, api }) {
      if (!isTenantId(flags.to)) {
        throw new CliError('INVALID_ARGUMENT', `--to must be a tenant id such as acme (got "${flags.to}")`, {
          details: { field: 'to' },
        });
      }
      return (await api()).call(method, {
        poolId: args.pool,
        offerTenantId: flags.to,
        ...(flags.ifVersion !== undefined ? { ifVersion: flags.ifVersion } : {}),
      });
    },
  });
}
