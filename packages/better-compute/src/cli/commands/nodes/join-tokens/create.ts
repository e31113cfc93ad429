/**
 * `join-tokens create --pool POOL [--uses N] [--ttl DURATION] [--pre-approved] [--out FILE]`:
 * joinTokens.create. With --out the one-time token goes to a new file of mode 0600, created before
 * the call (an existing file is ALREADY_EXISTS and no token is minted), and the answer is printed
 * without it; without --out the token is printed. Retry-safe like every create: a new idempotency key
 * each run unless --key, and a retry with the same --key gets the same token back (the server keeps it
 * sealed under the key, docs/decisions/join-token-retries.md).
 */
import { defineCommand } from '../../../define.js';
import { defined, keyFlag, mintToken, withIdempotencyKey } from '../../shared.js';

export default defineCommand({
  name: 'join-tokens create',
  group: 'Nodes',
  summary:
    'Mint a join token for a pool; --out writes the one-time token to a new 0600 file (joinTokens.create)',
  target: 'token',
  calls: ['joinTokens.create'],
  flags: {
    pool: { type: 'id', kind: 'pool', required: true, description: 'The pool nodes join' },
    uses: {
      type: 'number',
      integer: true,
      min: 1,
      max: 100_000,
      description: 'How many machines may join with it (default 1)',
      placeholder: 'N',
    },
    ttl: {
      type: 'duration',
      min: '1m',
      max: '30d',
      description: 'How long it stays valid, 1m to 30d (default 1d)',
      placeholder: 'DURATION',
    },
    preApproved: {
      type: 'boolean',
      description: 'Machines joining with it become nodes at once, without a join request to approve',
    },
    description: { type: 'string', description: 'What it is for', placeholder: 'TEXT' },
    out: {
      type: 'string',
      description: 'Write the one-time token to this new file (mode 0600) instead of printing it',
      placeholder: 'FILE',
    },
    key: keyFlag,
  },
  examples: [
    'better-compute join-tokens create --pool pool_01k… --uses 10 --ttl 2h --out join.token',
    'better-compute join-tokens create --pool pool_01k… --pre-approved --query token',
  ],
  async run(context) {
    const { flags, io, api } = context;
    const input = defined({
      poolId: flags.pool,
      uses: flags.uses,
      lifetimeSeconds: flags.ttl,
      preApproved: flags.preApproved ? true : undefined,
      description: flags.description,
    });
    // The key is told just before the call: a refused --out sends nothing, so has no key to retry with.
    const create = () =>
      withIdempotencyKey(context, flags.key, async (idempotencyKey) =>
        (await api()).call('joinTokens.create', { ...input, idempotencyKey }),
      );
    return mintToken(io.cwd, flags.out, create, (answer) => ({ joinToken: answer.joinToken }));
  },
});
