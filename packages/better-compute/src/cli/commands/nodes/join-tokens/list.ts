/** `join-tokens list [--pool]`: joinTokens.list (never the secrets), as a table by default. */
import { defineCommand } from '../../../define.js';
import { defined, listResult, pageFlags, pageOf } from '../../shared.js';

export default defineCommand({
  name: 'join-tokens list',
  group: 'Nodes',
  summary: 'List join tokens, never their secrets (joinTokens.list)',
  target: 'token',
  calls: ['joinTokens.list'],
  flags: {
    pool: { type: 'id', kind: 'pool', description: 'Only the tokens of this pool' },
    ...pageFlags,
  },
  defaultFormat: 'table',
  examples: ['better-compute join-tokens list', 'better-compute join-tokens list --pool pool_01k…'],
  async run(context) {
    const page = await (
      await context.api()
    ).call('joinTokens.list', defined({ poolId: context.flags.pool, ...pageOf(context.flags) }));
    return listResult(context, page, (token) => ({
      id: token.id,
      pool: token.poolId,
      state: token.state,
      // Named for what it counts: under a bare `uses`, a spent token's 0/4 read as "0 used of 4".
      usesLeft: `${token.usesLeft}/${token.usesAllowed}`,
      preApproved: token.preApproved,
      expiresAt: token.expiresAt,
      description: token.description,
    }));
  },
});
